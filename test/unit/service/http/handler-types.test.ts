/**
 * Service handlers are typed by the EndpointTable's result types: `Router.register` takes, for
 * `family.name`, a handler answering that endpoint's result, so a handler of the wrong shape (or of an
 * endpoint the table does not have) fails the type check of `npm test`. The `@ts-expect-error` lines
 * below are the claims: each must be an error, or the type check fails.
 */
import { describe, expect, it } from 'vitest';
import { Router } from '../../../../src/service/http/router.js';
import type { Authenticator } from '../../../../src/service/http/auth.js';
import { silentLogger } from '../../../../src/shared/log.js';

describe('service handlers typed by the endpoint table', () => {
  it('a handler answers its endpoint\'s result type; an empty answer only where `{}` is one', () => {
    // Each wrong handler on a router of its own: the type check refuses them, not the router.
    const fresh = () => new Router({} as Authenticator, silentLogger);
    // @ts-expect-error ls answers a file list, not a text
    fresh().register('file', 'ls', async () => 'not a list');
    // @ts-expect-error info answers a file record; nothing is not one
    fresh().register('file', 'info', async () => undefined);
    // @ts-expect-error a field of the wrong type (count is a number)
    fresh().register('file', 'updates_count', () => ({ count: 'three' }));
    // @ts-expect-error get_permission for everyone answers `members` (a record of names), not a list of records
    fresh().register('file', 'get_permission', () => ({ members: [{ id: 1 }] }));
    const router = fresh();
    router.register('file', 'move', async () => undefined);
    router.register('file', 'updates_count', () => ({ count: 3 }));
    router.register('file', 'get_permission', () => ['file_read']);
    expect(router.registered()).toEqual(['file.move', 'file.updates_count', 'file.get_permission']);
    expect(() => router.register('file', 'updates_count', () => ({ count: 3 }))).toThrow(/file.updates_count is registered twice/);
  });

  it('an endpoint the table does not have cannot be registered', () => {
    const router = new Router({} as Authenticator, silentLogger);
    // @ts-expect-error no such endpoint in the table
    expect(() => router.register('file', 'no_such_endpoint', () => undefined)).toThrow(/expected an endpoint of the EndpointTable, got file.no_such_endpoint/);
  });
});
