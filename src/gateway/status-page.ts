/**
 * The admin listener's status page (`GET /`): server-rendered HTML, no framework, readable without
 * JavaScript. A small script (`/status.js`) fetches the page again every 2 seconds, and as soon as the
 * event stream (`/events`) brings a change, and swaps in the new content, so upload progress and feed lag
 * move while the page is open.
 */
import type { LoggedProblem } from '../shared/log.js';
import type { GatewayStatus } from '../vfs/gateway-vfs.js';

export interface StatusPageModel {
  describe: Record<string, unknown>;
  status: GatewayStatus;
  libraries: string[];
  problems: readonly LoggedProblem[];
  nowMs: number;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let k = 0;
  while (n >= 1024 && k < units.length - 1) { n /= 1024; k++; }
  return `${k === 0 ? n : n.toFixed(1)} ${units[k]}`;
}

function ago(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

const e = (v: unknown): string => escapeHtml(v === null || v === undefined ? '' : String(v));

function table(head: string[], rows: string[][], empty: string): string {
  if (rows.length === 0) return `<p class="none">${e(empty)}</p>`;
  return `<table><thead><tr>${head.map((h) => `<th>${e(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.join('')}</tr>`).join('')}</tbody></table>`;
}

/** The content of the page (swapped in place by the refresh script). */
export function statusContent(m: StatusPageModel): string {
  const d = m.describe;
  const feeds = new Map(m.status.feeds.map((f) => [f.library, f]));
  const links = new Map(m.status.libraries.map((l) => [l.library, l]));
  const libraries = m.libraries.map((name) => {
    const f = feeds.get(name);
    const link = links.get(name);
    // Offline when the service does not answer (also from the start: served from what the gateway has) or the feed fails.
    const online = link?.online !== false && !!f?.healthy;
    const lag = f?.lastPollMs ? ago(m.nowMs - f.lastPollMs) : 'not polled yet';
    return [`<td>${e(name)}</td>`, `<td><span class="state ${online ? 'online' : 'offline'}">${online ? 'online' : 'offline'}</span></td>`,
      `<td class="num">${e(lag)}</td>`, `<td>${e((link?.online === false ? link.lastError : undefined) ?? f?.lastError ?? '')}</td>`];
  });
  const uploads = m.status.uploads.map((u) => {
    const size = u.size;
    const sent = Math.min(u.sentBytes ?? 0, size ?? 0);
    const pct = size ? Math.floor((sent / size) * 100) : 0;
    const progress = size === undefined ? '<span class="muted">hashing</span>'
      : `<progress max="${size}" value="${sent}"></progress> <span class="num">${pct} % · ${e(bytes(sent))} of ${e(bytes(size))}</span>`;
    return [`<td>/${e(u.library)}/${e(u.fullpath)}</td>`, `<td>${e(u.state)}</td>`, `<td>${progress}</td>`, `<td class="num">${u.failures}</td>`, `<td>${e(u.lastError ?? '')}</td>`];
  });
  const stranded = m.status.stranded.map((s) => [`<td>/${e(s.library)}/${e(s.fullpath)}</td>`]);
  const conflicts = (m.status.conflicts ?? []).map((c) => [`<td>/${e(c.library)}/${e(c.fullpath)}</td>`,
    `<td>${c.copy !== undefined ? `/${e(c.library)}/${e(c.copy)}` : `<span class="muted">${c.kind === 'deleted' ? 'deleted elsewhere; the edit brought it back' : 'changed elsewhere; kept, not deleted'}</span>`}</td>`,
    `<td>${e(c.otherBy ?? '')}</td>`, `<td class="num">${e(ago(m.nowMs - c.atMs))} ago</td>`]);
  const caches: [string, { bytes: number; hits: number; misses: number; maxBytes?: number }][] = [['metadata', m.status.metadata], ['blocks', m.status.blocks]];
  if (m.status.disk) caches.push(['disk', m.status.disk]);
  const cacheRows = caches.map(([name, c]) => {
    const rate = c.hits + c.misses === 0 ? '–' : `${Math.round((c.hits / (c.hits + c.misses)) * 100)} %`;
    const use = c.maxBytes ? `<progress max="${c.maxBytes}" value="${c.bytes}"></progress> ${e(bytes(c.bytes))} of ${e(bytes(c.maxBytes))}` : e(bytes(c.bytes));
    return [`<td>${e(name)}</td>`, `<td>${use}</td>`, `<td class="num">${c.hits}</td>`, `<td class="num">${c.misses}</td>`, `<td class="num">${rate}</td>`];
  });
  const problems = m.problems.slice(0, 20).map((p) => [`<td class="num">${e(ago(m.nowMs - p.timeMs))} ago</td>`, `<td><span class="level ${p.level}">${p.level}</span></td>`,
    `<td>${e(p.msg)}${Object.keys(p.fields).length ? `<div class="fields">${Object.entries(p.fields).map(([k, v]) => `${e(k)}=${e(v)}`).join(' ')}</div>` : ''}</td>`]);
  const facts: [string, unknown][] = [['Service', `${String(d.service_url ?? '')}${d.embedded_service ? ' (embedded)' : ''}`], ['WebDAV', d.webdav_url ?? 'off'],
    ['Mount', d.mount ?? 'none'], ['Control socket', d.control_socket], ['Up for', typeof d.uptime_s === 'number' ? ago(d.uptime_s * 1000) : '']];
  return [
    `<dl>${facts.map(([k, v]) => `<dt>${e(k)}</dt><dd>${e(v)}</dd>`).join('')}</dl>`,
    '<h2>Libraries</h2>', table(['Library', 'State', 'Feed lag', 'Last error'], libraries, 'No library is served.'),
    `<h2>Upload queue <span class="count">${m.status.uploads.length} pending</span></h2>`, table(['File', 'State', 'Progress', 'Failures', 'Last error'], uploads, 'Nothing waiting: every file is on the service.'),
    ...(conflicts.length ? [`<h2>Conflicts <span class="count">${conflicts.length} open</span></h2>`, '<p class="muted">Changed here and elsewhere: the edit made here keeps the name, the other version is kept beside it.</p>', table(['File', 'Other version', 'By', 'Found'], conflicts, '')] : []),
    ...(stranded.length ? [`<h2>Stranded <span class="count">${stranded.length}</span></h2>`, '<p class="muted">Journaled for libraries not served now; uploaded once the library is served again.</p>', table(['File'], stranded, '')] : []),
    '<h2>Recent errors</h2>', table(['When', 'Level', 'What'], problems, 'No warnings or errors since the start.'),
    `<h2>Caches <span class="count">${m.status.localFiles} local files</span></h2>`, table(['Cache', 'Use', 'Hits', 'Misses', 'Hit rate'], cacheRows, ''),
    ...pinsSection(m.status.pins),
  ].join('\n');
}

/** What is kept on this machine: pinned paths, what is still being fetched (with progress), errors. */
function pinsSection(p: StatusPageModel['status']['pins']): string[] {
  if (!p || p.pins.length === 0) return [];
  const e = escapeHtml;
  const here = p.pendingFiles === 0 ? 'all here' : `${p.pendingFiles} files, ${bytes(p.pendingBytes)} still to fetch`;
  const rows = [
    ...p.pins.map((path) => [`<td>${e(path)}</td>`, '<td>pinned</td>']),
    ...p.fetching.map((f) => [`<td>${e(f.path)}</td>`, `<td><progress max="${f.size}" value="${f.done}"></progress> <span class="num">${e(bytes(f.done))} of ${e(bytes(f.size))}</span></td>`]),
    ...p.errors.map((x) => [`<td>${e(x.path)}</td>`, `<td>${e(x.error)}</td>`]),
  ];
  return [`<h2>Kept on this machine <span class="count">${p.files} files, ${e(bytes(p.bytes))} · ${e(here)}</span></h2>`, table(['Path', 'State'], rows, '')];
}

const STYLE = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d232b; background: #f4f5f7; }
header { background: #2b3a4a; color: #fff; padding: .7rem 1.2rem; display: flex; justify-content: space-between; align-items: baseline; }
header h1 { font-size: 1.1rem; margin: 0; }
main { max-width: 64rem; margin: 0 auto; padding: .5rem 1.2rem 2rem; }
h2 { font-size: 1rem; margin: 1.4rem 0 .4rem; }
.count { font-weight: normal; color: #5b6573; font-size: .9rem; margin-left: .4rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .8rem 0; }
dt { color: #5b6573; } dd { margin: 0; font-family: ui-monospace, monospace; font-size: .9rem; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e2e5e9; vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; color: #5b6573; letter-spacing: .03em; }
.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
.state, .level { padding: .05rem .45rem; border-radius: .6rem; font-size: .8rem; font-weight: 600; }
.online { background: #dff3e4; color: #17642b; } .offline { background: #fbe2e2; color: #9b1c1c; }
.warn { background: #fff1cc; color: #7a5200; } .error, .fatal { background: #fbe2e2; color: #9b1c1c; }
.fields { color: #5b6573; font-family: ui-monospace, monospace; font-size: .8rem; }
.none, .muted { color: #5b6573; } progress { width: 10rem; vertical-align: middle; }
#live { font-size: .8rem; opacity: .8; }
`;

/** The whole page. */
export function statusPage(m: StatusPageModel): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>cloudlib status</title><style>${STYLE}</style></head>
<body><header><h1>cloudlib gateway</h1><span id="live">updated ${e(new Date(m.nowMs).toISOString().slice(11, 19))} UTC</span></header>
<main id="content">
${statusContent(m)}
</main>
<script src="/status.js" defer></script>
</body></html>
`;
}

/**
 * Fetches the page every 2 s, and at once when the event stream (`/events`) brings a change, and swaps in
 * its content; says so when the gateway stops answering.
 */
export const STATUS_SCRIPT = `(() => {
  const live = document.getElementById('live');
  async function refresh() {
    try {
      const res = await fetch('/', { cache: 'no-store' });
      if (!res.ok) throw new Error('HTTP ' + res.status);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      document.getElementById('content').replaceWith(doc.getElementById('content'));
      live.textContent = doc.getElementById('live').textContent;
    } catch (err) {
      live.textContent = 'not answering (' + err.message + '); retrying';
    }
  }
  setInterval(refresh, 2000);
  // A change made elsewhere (the admin listener's /events stream): the page is fetched again at once.
  if (window.EventSource) {
    let due;
    new EventSource('/events').addEventListener('change', () => {
      clearTimeout(due);
      due = setTimeout(refresh, 100);
    });
  }
})();
`;
