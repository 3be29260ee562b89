/*
 * Video and audio: posts progress events (seconds of the media) when playback starts, when it ends and
 * every 5 seconds of media played in between. A 5-second mark is reported at the first `timeupdate` past
 * it; when the browser skipped that (a busy page: `timeupdate` fires every 15 to 250 ms, and at 4x speed
 * the last second of a clip goes by in 250 ms), the mark is reported when playback pauses or ends, before
 * the end event, so that no mark played through is ever lost. Browser code.
 */
import { postViewerEvent } from './viewer-events.js';

const PERIOD_SECONDS = 5;
const media = document.getElementById('media');
let lastMark = 0;

function post() {
  const total = Number.isFinite(media.duration) ? round(media.duration) : 0;
  postViewerEvent({ progress: { current: round(media.currentTime), total } });
}

function round(seconds) {
  return Math.round(seconds * 1000) / 1000;
}

media.addEventListener('play', () => {
  lastMark = media.currentTime;
  post();
});
/** Posts a progress event when a 5-second mark was played through since the last one. */
function markPassed() {
  if (media.currentTime < lastMark) lastMark = media.currentTime; // seeked back
  if (media.currentTime - lastMark >= PERIOD_SECONDS) {
    lastMark += PERIOD_SECONDS * Math.floor((media.currentTime - lastMark) / PERIOD_SECONDS);
    post();
  }
}

media.addEventListener('timeupdate', () => {
  if (media.paused || media.ended) return;
  markPassed();
});
media.addEventListener('pause', () => { if (!media.ended) markPassed(); });
media.addEventListener('seeked', () => { lastMark = media.currentTime; });
media.addEventListener('ended', () => {
  markPassed();
  post();
});
