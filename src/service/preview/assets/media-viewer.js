/*
 * Video and audio: posts progress events (seconds of the media) when playback starts, when it ends and
 * every 5 seconds of media played in between. Browser code.
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
media.addEventListener('timeupdate', () => {
  if (media.paused || media.ended) return;
  if (media.currentTime < lastMark) lastMark = media.currentTime; // seeked back
  if (media.currentTime - lastMark >= PERIOD_SECONDS) {
    lastMark += PERIOD_SECONDS * Math.floor((media.currentTime - lastMark) / PERIOD_SECONDS);
    post();
  }
});
media.addEventListener('seeked', () => { lastMark = media.currentTime; });
media.addEventListener('ended', post);
