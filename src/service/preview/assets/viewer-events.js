/* The viewer events of the preview pages, posted to the embedding page (spec: Events). Browser code. */

/**
 * Posts `{type: 'SVC_VIEWER_EVENT', ...fields, time}` as a JSON string to the parent window.
 * `time` is the moment of the event in milliseconds (Unix epoch).
 */
export function postViewerEvent(fields) {
  if (window.parent === window) return;
  window.parent.postMessage(JSON.stringify({ type: 'SVC_VIEWER_EVENT', ...fields, time: Date.now() }), '*');
}
