import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, ConfigError, DEFAULT_ADMIN_LISTEN, parseHostPort } from '../../../src/gateway/config.js';

let dir: string;
beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), 'cloudlib-config-')); });
afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

describe('gateway configuration', () => {
  it('defaults to the embedded service, WebDAV on 127.0.0.1:8080 and a mount where FUSE is usable', async () => {
    const c = await loadConfig({}, { HOME: join(dir, 'home') }, { fuseUsable: true, cwd: dir });
    expect(c.service).toBeUndefined();
    expect(c.data).toBe(join(dir, 'home', '.local', 'share', 'cloudlib'));
    expect(c.webdav.listen).toBe('127.0.0.1:8080');
    expect(c.mount.path).toBe(join(dir, 'mnt'));
    expect(c.feed.interval_ms).toBe(2000);
    const noFuse = await loadConfig({}, {}, { fuseUsable: false, cwd: dir });
    expect(noFuse.mount.path).toBeNull();
  });

  it('one data folder per user, found from any folder: $CLOUDLIB_HOME, else $XDG_DATA_HOME/cloudlib, else ~/.local/share/cloudlib', async () => {
    const home = join(dir, 'home');
    expect((await loadConfig({}, { HOME: home }, { fuseUsable: false, cwd: join(dir, 'a') })).data).toBe(join(home, '.local', 'share', 'cloudlib'));
    expect((await loadConfig({}, { HOME: home }, { fuseUsable: false, cwd: join(dir, 'b') })).data).toBe(join(home, '.local', 'share', 'cloudlib'));
    expect((await loadConfig({}, { HOME: home, XDG_DATA_HOME: join(dir, 'xdg') }, { fuseUsable: false, cwd: dir })).data).toBe(join(dir, 'xdg', 'cloudlib'));
    expect((await loadConfig({}, { HOME: home, XDG_DATA_HOME: 'relative' }, { fuseUsable: false, cwd: dir })).data).toBe(join(home, '.local', 'share', 'cloudlib'));
    expect((await loadConfig({}, { HOME: home, CLOUDLIB_HOME: 'here' }, { fuseUsable: false, cwd: dir })).data).toBe(join(dir, 'here'));
    expect((await loadConfig({ data: 'd' }, { HOME: home, CLOUDLIB_HOME: 'here' }, { fuseUsable: false, cwd: dir })).data).toBe(join(dir, 'd'));
  });

  it('the embedded service and the admin listener default to 8081 and 8082, kept; a given address is not', async () => {
    const d = await loadConfig({ data: 'd' }, {}, { fuseUsable: false, cwd: dir });
    expect([d.service_listen, d.admin_listen, d.keep_listen]).toEqual(['127.0.0.1:8081', '127.0.0.1:8082', { service: true, admin: true }]);
    const given = await loadConfig({ data: 'd', serviceListen: '127.0.0.1:0' }, { CLOUDLIB_ADMIN: '127.0.0.1:9000' }, { fuseUsable: false, cwd: dir });
    expect([given.service_listen, given.admin_listen, given.keep_listen]).toEqual(['127.0.0.1:0', '127.0.0.1:9000', { service: false, admin: false }]);
  });

  it('CLOUDLIB_DEFAULT_SERVICE_LISTEN and CLOUDLIB_DEFAULT_ADMIN_LISTEN replace the defaults, still kept; a bad one is refused', async () => {
    const env = { CLOUDLIB_DEFAULT_SERVICE_LISTEN: '127.0.0.1:18081', CLOUDLIB_DEFAULT_ADMIN_LISTEN: '127.0.0.1:18082' };
    const d = await loadConfig({ data: 'd' }, env, { fuseUsable: false, cwd: dir });
    expect([d.service_listen, d.admin_listen, d.keep_listen]).toEqual(['127.0.0.1:18081', '127.0.0.1:18082', { service: true, admin: true }]);
    const given = await loadConfig({ data: 'd', serviceListen: '127.0.0.1:0' }, { ...env, CLOUDLIB_ADMIN: 'off' }, { fuseUsable: false, cwd: dir });
    expect([given.service_listen, given.admin_listen, given.keep_listen]).toEqual(['127.0.0.1:0', null, { service: false, admin: false }]);
    await expect(loadConfig({ data: 'd' }, { CLOUDLIB_DEFAULT_SERVICE_LISTEN: '8081' }, { fuseUsable: false, cwd: dir })).rejects.toThrow("CLOUDLIB_DEFAULT_SERVICE_LISTEN: expected HOST:PORT, got '8081'");
    await expect(loadConfig({ data: 'd' }, { CLOUDLIB_DEFAULT_ADMIN_LISTEN: 'off' }, { fuseUsable: false, cwd: dir })).rejects.toThrow("CLOUDLIB_DEFAULT_ADMIN_LISTEN: expected HOST:PORT, got 'off'");
  });

  it('a log file: from the flag, the environment or log.file; never inside the mount', async () => {
    expect((await loadConfig({ data: 'd', logFile: 'logs/gw.log' }, {}, { fuseUsable: false, cwd: dir })).log.file).toBe(join(dir, 'logs', 'gw.log'));
    expect((await loadConfig({ data: 'd' }, { CLOUDLIB_LOG_FILE: '/var/log/cloudlib.log' }, { fuseUsable: false, cwd: dir })).log.file).toBe('/var/log/cloudlib.log');
    expect((await loadConfig({ data: 'd' }, {}, { fuseUsable: false, cwd: dir })).log.file).toBeUndefined();
    await expect(loadConfig({ data: 'd', mount: 'mnt', logFile: 'mnt/Library/gw.log' }, {}, { fuseUsable: true, cwd: dir })).rejects.toThrow(/inside the mount/);
  });

  it('takes the exact flags of `cloudlib up`', async () => {
    const c = await loadConfig({ data: 'd', webdav: '127.0.0.1:9999', noMount: true, serviceListen: '127.0.0.1:7000' }, { CLOUDLIB_HOME: 'ignored' }, { fuseUsable: true, cwd: dir });
    expect(c.data).toBe(join(dir, 'd'));
    expect(c.webdav.listen).toBe('127.0.0.1:9999');
    expect(c.mount.path).toBeNull();
    expect(c.service_listen).toBe('127.0.0.1:7000');
  });

  it('every documented way of turning a listener off works: false or "off" in a JSON or TOML file, the environment, the flag', async () => {
    const json = join(dir, 'c.json');
    await writeFile(json, JSON.stringify({ admin_listen: false, webdav: { listen: false } }));
    const fromJson = await loadConfig({ config: json }, {}, { fuseUsable: false, cwd: dir });
    expect(fromJson.admin_listen).toBeNull();
    expect(fromJson.webdav.listen).toBeNull();
    const toml = join(dir, 'c.toml');
    await writeFile(toml, 'admin_listen = "off"\n[webdav]\nlisten = "off"\n');
    const fromToml = await loadConfig({ config: toml }, {}, { fuseUsable: false, cwd: dir });
    expect(fromToml.admin_listen).toBeNull();
    expect(fromToml.webdav.listen).toBeNull();
    const fromEnv = await loadConfig({}, { CLOUDLIB_ADMIN: 'off', CLOUDLIB_WEBDAV: 'off' }, { fuseUsable: false, cwd: dir });
    expect(fromEnv.admin_listen).toBeNull();
    expect(fromEnv.webdav.listen).toBeNull();
    const fromFlags = await loadConfig({ adminListen: 'off', webdav: 'off' }, {}, { fuseUsable: false, cwd: dir });
    expect(fromFlags.admin_listen).toBeNull();
    expect(fromFlags.webdav.listen).toBeNull();
    // A flag still wins over a file that turns the listener off; the defaults stay when nothing is said.
    expect((await loadConfig({ config: json, adminListen: '127.0.0.1:9100' }, {}, { fuseUsable: false, cwd: dir })).admin_listen).toBe('127.0.0.1:9100');
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).admin_listen).toBe(DEFAULT_ADMIN_LISTEN);
  });

  it('journal.max_file_mb: the largest file a write may make, 0 (no limit) by default; a bad value is refused', async () => {
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).journal.max_file_mb).toBe(0);
    const file = join(dir, 'm.json');
    await writeFile(file, JSON.stringify({ journal: { max_file_mb: 512 } }));
    expect((await loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).journal.max_file_mb).toBe(512);
    await writeFile(file, JSON.stringify({ journal: { max_file_mb: -1 } }));
    await expect(loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(ConfigError);
  });

  it('journal.max_pending_mb: the bytes that may wait to upload, 0 (no bound) by default; a bad value is refused', async () => {
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).journal.max_pending_mb).toBe(0);
    const file = join(dir, 'p.json');
    await writeFile(file, JSON.stringify({ journal: { max_pending_mb: 2048 } }));
    expect((await loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).journal.max_pending_mb).toBe(2048);
    await writeFile(file, JSON.stringify({ journal: { max_pending_mb: 1.5 } }));
    await expect(loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/journal\.max_pending_mb/);
  });

  it('cache.min_free_percent: the share of the cache\'s disk left free, 5 by default; 100 or more refused', async () => {
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).cache.min_free_percent).toBe(5);
    const file = join(dir, 'f.json');
    await writeFile(file, JSON.stringify({ cache: { min_free_percent: 12.5 } }));
    expect((await loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).cache.min_free_percent).toBe(12.5);
    for (const bad of [100, -1, 'lots']) {
      await writeFile(file, JSON.stringify({ cache: { min_free_percent: bad } }));
      await expect(loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/cache\.min_free_percent/);
    }
  });

  it('the embedded service\'s URL for its clients: flag, environment, file; checked', async () => {
    expect((await loadConfig({ data: 'd' }, {}, { fuseUsable: false, cwd: dir })).service_url).toBeUndefined();
    expect((await loadConfig({ data: 'd', serviceUrl: 'http://files.example.com:8081/' }, {}, { fuseUsable: false, cwd: dir })).service_url).toBe('http://files.example.com:8081');
    expect((await loadConfig({ data: 'd' }, { CLOUDLIB_SERVICE_URL: 'https://files.example.com' }, { fuseUsable: false, cwd: dir })).service_url).toBe('https://files.example.com');
    await expect(loadConfig({ data: 'd', serviceUrl: 'files.example.com' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(ConfigError);
  });

  it('the embedded service\'s metadata database: environment or file; a PostgreSQL URL without password', async () => {
    expect((await loadConfig({ data: 'd' }, {}, { fuseUsable: false, cwd: dir })).service_metadata).toBeUndefined();
    const url = 'postgresql://cloudlib@db.example.com:5432/cloudlib';
    expect((await loadConfig({ data: 'd' }, { CLOUDLIB_SERVICE_METADATA: url }, { fuseUsable: false, cwd: dir })).service_metadata).toBe(url);
    await writeFile(join(dir, 'cloudlib.toml'), `service_metadata = "${url}"\n`);
    expect((await loadConfig({ config: join(dir, 'cloudlib.toml') }, {}, { fuseUsable: false, cwd: dir })).service_metadata).toBe(url);
    await expect(loadConfig({ data: 'd' }, { CLOUDLIB_SERVICE_METADATA: 'mysql://db/x' }, { fuseUsable: false, cwd: dir })).rejects.toThrow(/postgresql:\/\//);
    const withPassword = loadConfig({ data: 'd' }, { CLOUDLIB_SERVICE_METADATA: 'postgresql://cloudlib:hunter2@db/x' }, { fuseUsable: false, cwd: dir });
    await expect(withPassword).rejects.toThrow(/PGPASSWORD/);
    await expect(withPassword).rejects.not.toThrow(/hunter2/);
  });

  it('reads a TOML file with secrets from a file and from the environment', async () => {
    await writeFile(join(dir, 'secret.txt'), 'file-secret\n');
    await writeFile(join(dir, 'cloudlib.toml'), [
      'data = "state"',
      '[service]',
      'base_url = "https://files.example.com/"',
      'upload_header_prefix = "x-acme-"',
      '[[service.libraries]]',
      'name = "Projects"',
      'org_client_id = "oc1"',
      'org_client_secret_file = "secret.txt"',
      '[service.enterprise]',
      'client_id = "ent1"',
      'client_secret_env = "ENT_SECRET"',
      '[webdav]',
      'listen = "0.0.0.0:8081"',
      '[[webdav.users]]',
      'name = "alice"',
      'password_env = "ALICE_PW"',
      'op_name = "Alice"',
      'read_only = true',
      '[feed]',
      'interval_ms = 500',
    ].join('\n'));
    const c = await loadConfig({ config: 'cloudlib.toml' }, { ENT_SECRET: 'env-secret', ALICE_PW: 'pw' }, { fuseUsable: false, cwd: dir });
    expect(c.data).toBe(join(dir, 'state'));
    expect(c.service).toEqual({
      base_url: 'https://files.example.com', upload_header_prefix: 'x-acme-',
      libraries: [{ name: 'Projects', org_client_id: 'oc1', org_client_secret: 'file-secret' }],
      enterprise: { client_id: 'ent1', client_secret: 'env-secret' }, partner: undefined, user: undefined,
    });
    expect(c.webdav.users).toEqual([{ name: 'alice', password: 'pw', op_id: undefined, op_name: 'Alice', read_only: true }]);
    expect(c.feed.interval_ms).toBe(500);
  });

  it('members acting as themselves: member_logins, users acting as a member, mount.member, the application; incomplete ones refused', async () => {
    const c0 = await loadConfig({}, {}, { fuseUsable: false, cwd: dir });
    expect(c0.webdav).toMatchObject({ member_logins: false, member_sessions: 100, member_idle_s: 900 });
    expect(c0.mount.member).toBeUndefined();
    await writeFile(join(dir, 'members.toml'), [
      '[service]', 'base_url = "https://files.example.com"', 'libraries = [{ org_client_id = "oc1", org_client_secret = "s" }]',
      '[service.application]', 'client_id = "app1"', 'client_secret_env = "APP_SECRET"',
      '[webdav]', 'member_logins = true', 'member_sessions = 5', 'member_idle_s = 60',
      '[[webdav.users]]', 'name = "robot"', 'password = "pw"', 'member = "alice@example.com"', 'member_password_env = "ALICE_PW"',
      '[mount]', 'member = "bob@example.com"', 'member_password = "bob-pw"',
    ].join('\n'));
    const c = await loadConfig({ config: 'members.toml' }, { APP_SECRET: 'app-secret', ALICE_PW: 'alice-pw' }, { fuseUsable: false, cwd: dir });
    expect(c.service!.application).toEqual({ client_id: 'app1', client_secret: 'app-secret' });
    expect(c.webdav).toMatchObject({ member_logins: true, member_sessions: 5, member_idle_s: 60 });
    expect(c.webdav.users[0]).toMatchObject({ name: 'robot', member: 'alice@example.com', member_password: 'alice-pw' });
    expect(c.mount).toMatchObject({ member: 'bob@example.com', member_password: 'bob-pw' });
    const bad = async (lines: string[]) => {
      await writeFile(join(dir, 'bad-members.toml'), lines.join('\n'));
      return loadConfig({ config: 'bad-members.toml' }, {}, { fuseUsable: false, cwd: dir });
    };
    await expect(bad(['[[webdav.users]]', 'name = "r"', 'password = "p"', 'member = "a@example.com"'])).rejects.toThrow(/webdav.users\[0\].member: the member's password is required/);
    await expect(bad(['[[webdav.users]]', 'name = "r"', 'password = "p"', 'member_password = "x"'])).rejects.toThrow(/member_password: given without member/);
    await expect(bad(['[[webdav.users]]', 'name = "r"', 'password = "p"', 'member = "a@example.com"', 'member_password = "x"', 'op_name = "R"'])).rejects.toThrow(/do not go together/);
    await expect(bad(['[mount]', 'member = "a@example.com"'])).rejects.toThrow(/mount.member: the member's password is required/);
    await expect(bad(['[webdav]', 'member_logins = "yes"'])).rejects.toThrow(/webdav.member_logins/);
  });

  it('refuses bad input with a message naming the key', async () => {
    await writeFile(join(dir, 'bad.json'), JSON.stringify({ service: { base_url: 'https://x' } }));
    await expect(loadConfig({ config: 'bad.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/library authorizations .* or an enterprise/);
    await writeFile(join(dir, 'bad2.json'), JSON.stringify({ colour: 'blue' }));
    await expect(loadConfig({ config: 'bad2.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/unknown key 'colour'/);
    await expect(loadConfig({ webdav: 'nope' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(ConfigError);
    await writeFile(join(dir, 'bad3.json'), JSON.stringify({ service: { base_url: 'https://x', enterprise: { client_id: 'a', client_secret_env: 'MISSING' } } }));
    await expect(loadConfig({ config: 'bad3.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/MISSING is not set/);
    await expect(loadConfig({ logLevel: 'loud' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/log level/);
  });

  it('anonymous read-write on a network address is refused unless the configuration says so explicitly', async () => {
    const file = join(dir, 'anon.toml');
    await writeFile(file, '[webdav]\nanonymous = "read-write"\n');
    await expect(loadConfig({ config: file, webdav: '0.0.0.0:8080' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/allow_anonymous_write_from_network/);
    await expect(loadConfig({ config: file, webdav: '[::]:8080' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(ConfigError);
    await expect(loadConfig({ config: file, webdav: '192.168.1.5:8080' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(ConfigError);
    // Loopback, read-only, or said so: fine.
    expect((await loadConfig({ config: file, webdav: '127.0.0.1:8080' }, {}, { fuseUsable: false, cwd: dir })).webdav.anonymous).toBe('read-write');
    expect((await loadConfig({ config: file, webdav: 'localhost:8080' }, {}, { fuseUsable: false, cwd: dir })).webdav.anonymous).toBe('read-write');
    await writeFile(join(dir, 'ro.toml'), '[webdav]\nanonymous = "read-only"\n');
    expect((await loadConfig({ config: join(dir, 'ro.toml'), webdav: '0.0.0.0:8080' }, {}, { fuseUsable: false, cwd: dir })).webdav.anonymous).toBe('read-only');
    await writeFile(join(dir, 'meant.toml'), '[webdav]\nanonymous = "read-write"\nallow_anonymous_write_from_network = true\n');
    expect((await loadConfig({ config: join(dir, 'meant.toml'), webdav: '0.0.0.0:8080' }, {}, { fuseUsable: false, cwd: dir })).webdav.allow_anonymous_write_from_network).toBe(true);
  });

  it('WebDAV limits and timeouts: defaults, overrides, and bad values refused', async () => {
    const c = await loadConfig({}, {}, { fuseUsable: false, cwd: dir });
    expect(c.webdav).toMatchObject({
      idle_timeout_s: 60, headers_timeout_s: 30, keep_alive_timeout_s: 5, request_timeout_s: 21_600, max_connections_per_client: 64,
      max_xml_body_bytes: 1024 * 1024, max_properties_per_resource: 1000, max_property_bytes_per_resource: 1024 * 1024, max_property_value_bytes: 64 * 1024,
    });
    const file = join(dir, 'limits.toml');
    await writeFile(file, '[webdav]\nidle_timeout_s = 120\nrequest_timeout_s = 0\nmax_connections_per_client = 8\n');
    expect((await loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir })).webdav).toMatchObject({ idle_timeout_s: 120, request_timeout_s: 0, max_connections_per_client: 8 });
    for (const [text, key] of [['idle_timeout_s = 0', 'idle_timeout_s'], ['headers_timeout_s = -1', 'headers_timeout_s'], ['max_connections_per_client = 0', 'max_connections_per_client'], ['idle_timout_s = 5', 'idle_timout_s']]) {
      await writeFile(file, `[webdav]\n${text}\n`);
      await expect(loadConfig({ config: file }, {}, { fuseUsable: false, cwd: dir }), text).rejects.toThrow(new RegExp(`webdav\\.${key}`));
    }
  });

  it('journal: durability, group commit and write-back delay; defaults, overrides, bad values refused', async () => {
    const d = await loadConfig({}, {}, { fuseUsable: false, cwd: dir });
    expect(d.journal).toEqual({ durability: 'group', group_commit_ms: 1000, upload_delay_ms: 2000, upload_concurrency: 4, small_upload_concurrency: 16, max_file_mb: 0, max_pending_mb: 0 });
    await writeFile(join(dir, 'j.json'), JSON.stringify({ journal: { durability: 'close', upload_delay_ms: 0, upload_concurrency: 2, small_upload_concurrency: 32 } }));
    expect((await loadConfig({ config: 'j.json' }, {}, { fuseUsable: false, cwd: dir })).journal).toEqual({ durability: 'close', group_commit_ms: 1000, upload_delay_ms: 0, upload_concurrency: 2, small_upload_concurrency: 32, max_file_mb: 0, max_pending_mb: 0 });
    for (const bad of [{ upload_delay_ms: 60_001 }, { upload_delay_ms: -1 }, { upload_delay_ms: 'soon' }]) {
      await writeFile(join(dir, 'bad.json'), JSON.stringify({ journal: bad }));
      await expect(loadConfig({ config: 'bad.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/journal\.upload_delay_ms/);
    }
    for (const [key, bad] of [['upload_concurrency', 0], ['upload_concurrency', 1.5], ['small_upload_concurrency', 257], ['small_upload_concurrency', 'many']] as const) {
      await writeFile(join(dir, 'bad.json'), JSON.stringify({ journal: { [key]: bad } }));
      await expect(loadConfig({ config: 'bad.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(new RegExp(`journal\\.${key}`));
    }
  });

  it('mount.transport, mount.ring_depth and mount.write_mode: defaults, overrides, bad values refused', async () => {
    const d = await loadConfig({}, {}, { fuseUsable: false, cwd: dir });
    expect([d.mount.transport, d.mount.ring_depth, d.mount.write_mode]).toEqual(['auto', 16, 'auto']);
    await writeFile(join(dir, 't.json'), JSON.stringify({ mount: { transport: 'dev', ring_depth: 64, write_mode: 'writeback' } }));
    const t = await loadConfig({ config: 't.json' }, {}, { fuseUsable: false, cwd: dir });
    expect([t.mount.transport, t.mount.ring_depth, t.mount.write_mode]).toEqual(['dev', 64, 'writeback']);
    for (const [key, bad] of [['transport', 'fast'], ['transport', 1], ['ring_depth', 0], ['ring_depth', 257], ['ring_depth', 2.5], ['write_mode', 'cached'], ['write_mode', true]] as const) {
      await writeFile(join(dir, 'bad.json'), JSON.stringify({ mount: { [key]: bad } }));
      await expect(loadConfig({ config: 'bad.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(new RegExp(`mount\\.${key}`));
    }
  });

  it('mount.links: on by default, off when set false, a non-boolean refused', async () => {
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).mount.links).toBe(true);
    await writeFile(join(dir, 'l.json'), JSON.stringify({ mount: { links: false } }));
    expect((await loadConfig({ config: 'l.json' }, {}, { fuseUsable: false, cwd: dir })).mount.links).toBe(false);
    await writeFile(join(dir, 'bad.json'), JSON.stringify({ mount: { links: 'yes' } }));
    await expect(loadConfig({ config: 'bad.json' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/mount\.links/);
  });

  it('bwlimit: off by default; the file, CLOUDLIB_BWLIMIT and --bwlimit in rising order; a bad rate refused', async () => {
    expect((await loadConfig({}, {}, { fuseUsable: false, cwd: dir })).bwlimit).toBe('off');
    await writeFile(join(dir, 'bw.json'), JSON.stringify({ bwlimit: '10M:2M' }));
    expect((await loadConfig({ config: 'bw.json' }, {}, { fuseUsable: false, cwd: dir })).bwlimit).toBe('10M:2M');
    expect((await loadConfig({ config: 'bw.json' }, { CLOUDLIB_BWLIMIT: '1M' }, { fuseUsable: false, cwd: dir })).bwlimit).toBe('1M');
    expect((await loadConfig({ config: 'bw.json', bwlimit: '512k' }, { CLOUDLIB_BWLIMIT: '1M' }, { fuseUsable: false, cwd: dir })).bwlimit).toBe('512k');
    await expect(loadConfig({ bwlimit: 'fast' }, {}, { fuseUsable: false, cwd: dir })).rejects.toThrow(/bwlimit: expected a rate such as 10M/);
  });

  it('parses host:port', () => {
    expect(parseHostPort('127.0.0.1:80', 'x')).toEqual({ host: '127.0.0.1', port: 80 });
    expect(parseHostPort('[::1]:8080', 'x')).toEqual({ host: '::1', port: 8080 });
    expect(() => parseHostPort('127.0.0.1:99999', 'x')).toThrow(/expected HOST:PORT/);
  });
});
