/* Images, text and Markdown: a one-page document; posts its page event once it is shown. Browser code. */
import { postViewerEvent } from './viewer-events.js';

const loaded = () => postViewerEvent({ page: { current: 1, total: 1 } });
const image = document.getElementById('image');
if (image && !image.complete) {
  image.addEventListener('load', loaded, { once: true });
  image.addEventListener('error', () => image.replaceWith(Object.assign(document.createElement('p'), { className: 'note', textContent: 'This image cannot be shown.' })), { once: true });
} else {
  loaded();
}
