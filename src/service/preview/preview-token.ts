/**
 * PreviewToken: the signed part of a preview address. The token carries everything the page needs
 * (library, file, content hash, watermark, expiry), serialised as base64url JSON, followed by an
 * HMAC-SHA256 of that text under the host's key. Nothing is stored on the service: a token is valid
 * when its MAC matches and its expiry is in the future.
 *
 * Three uses, told apart by `use`: `page` (the 10-minute link handed out by `preview_url`), `content`
 * (the page's own access to the bytes, valid for a viewing session so that a long video keeps
 * streaming after the link expired) and `thumb` (a thumbnail link).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type TokenUse = 'page' | 'content' | 'thumb';

export interface PreviewClaims {
  use: TokenUse;
  libraryId: number;
  fullpath: string;
  filehash: string;
  filename: string;
  filesize: number;
  /** Watermark text; empty = no watermark. */
  watermark: string;
  /** Viewer's name shown in the watermark; empty = none. */
  memberName: string;
  /** Expiry, unix milliseconds. */
  expires: number;
}

/** Why a token was refused: `invalid` (malformed or tampered, 403) or `expired` (410). */
export type TokenRefusal = 'invalid' | 'expired';

interface Wire { u: string; l: number; p: string; h: string; n: string; s: number; w?: string; m?: string; e: number }

const USES: readonly TokenUse[] = ['page', 'content', 'thumb'];
const SHA1 = /^[0-9a-f]{40}$/;

export class PreviewTokenSigner {
  constructor(private readonly key: Buffer) {
    if (key.length < 16) throw new Error(`preview signing key: expected at least 16 bytes, got ${key.length}`);
  }

  sign(c: PreviewClaims): string {
    const wire: Wire = { u: c.use, l: c.libraryId, p: c.fullpath, h: c.filehash, n: c.filename, s: c.filesize, e: c.expires };
    if (c.watermark) wire.w = c.watermark;
    if (c.memberName) wire.m = c.memberName;
    const body = Buffer.from(JSON.stringify(wire), 'utf8').toString('base64url');
    return `${body}.${this.mac(body)}`;
  }

  /** The claims of a token signed by this key for `use`, or why it is refused at time `now` (ms). */
  verify(token: string, use: TokenUse, now: number): PreviewClaims | TokenRefusal {
    const dot = token.indexOf('.');
    if (dot <= 0 || token.length > 16_384) return 'invalid';
    const body = token.slice(0, dot);
    // The MAC is compared as text, not decoded: base64url decoding ignores the
    // spare low bits of the last character, so two spellings decode alike.
    const given = Buffer.from(token.slice(dot + 1), 'latin1');
    const want = Buffer.from(this.mac(body), 'latin1');
    if (given.length !== want.length || !timingSafeEqual(given, want)) return 'invalid';
    let wire: Wire;
    try {
      wire = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Wire;
    } catch {
      return 'invalid';
    }
    const claims = toClaims(wire);
    if (!claims || claims.use !== use) return 'invalid';
    return claims.expires <= now ? 'expired' : claims;
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}

function toClaims(w: Wire): PreviewClaims | undefined {
  const ok = typeof w === 'object' && w !== null && USES.includes(w.u as TokenUse)
    && Number.isSafeInteger(w.l) && typeof w.p === 'string' && typeof w.h === 'string' && SHA1.test(w.h)
    && typeof w.n === 'string' && Number.isSafeInteger(w.s) && w.s >= 0 && Number.isSafeInteger(w.e)
    && (w.w === undefined || typeof w.w === 'string') && (w.m === undefined || typeof w.m === 'string');
  if (!ok) return undefined;
  return {
    use: w.u as TokenUse, libraryId: w.l, fullpath: w.p, filehash: w.h, filename: w.n, filesize: w.s,
    watermark: w.w ?? '', memberName: w.m ?? '', expires: w.e,
  };
}
