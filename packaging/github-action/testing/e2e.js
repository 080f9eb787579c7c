#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// End-to-end test of the action: runs the committed dist/main.js and then dist/post.js as the
// runner does (INPUT_*, GITHUB_OUTPUT/GITHUB_STATE/GITHUB_STEP_SUMMARY files, STATE_* handed from
// main to post, job-status re-evaluated for post) with the real lazycache CLI against an S3
// server on loopback, and checks outputs, state, summary and the store for:
//   a miss followed by a save; an exact hit (mount, and extract); a partial hit via restore-keys;
//   lookup-only; fail-on-cache-miss; a failed job (no save) and save-always (save).
//   an entry of the key saved for other paths (a miss), and a mount that fails: neither reports
//   cache-hit, and post saves.
// Usage: e2e.js LAZYCACHE S3_ENV_FILE   (S3_ENV_FILE as tests/servers/swift-s3.sh writes it)
//        e2e.js LAZYCACHE local         (a file:// store in a temporary directory: no server)
'use strict';

const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { RunnerEnv } = require('./runner_env');
const lc = require('../src/lazycache');

const [lazycache, envFile] = process.argv.slice(2);
if (!lazycache || !envFile) {
  console.error('usage: e2e.js LAZYCACHE S3_ENV_FILE');
  process.exit(2);
}
const localStore = envFile === 'local' ? fs.mkdtempSync(path.join(require('os').tmpdir(), 'lc-e2e-store-')) : '';
const s3 = localStore ? {} : Object.fromEntries(fs.readFileSync(envFile, 'utf8').split('\n').filter((l) => l.includes('='))
  .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
const DIST = path.join(__dirname, '..', 'dist');
// Entries are immutable and the server's data outlives a run: every run uses fresh keys.
const P = `e2e-${Date.now().toString(36)}-${process.pid}`;
const storeInputs = localStore ? { store: `file://${localStore}` }
  : { store: `s3://lazycache/action-e2e`, endpoint: s3.S3_ENDPOINT, region: s3.S3_REGION };
// The same store as CLI options, for the checks that call lazycache directly.
const storeArgs = ['--store', storeInputs.store, ...(localStore ? [] : ['--endpoint', s3.S3_ENDPOINT, '--region', s3.S3_REGION])];
// The CLI's run directory (daemon states, save records) for this run only: a miss leaves its save
// record (RUN_DIR/save-*.info) for a save that never comes in the path-identity scenario, and as
// root the default, /run/lazycache, outlives the test. Removed with the workspace.
const RUN_DIR = fs.mkdtempSync(path.join(require('os').tmpdir(), 'lc-e2e-run-'));
const baseEnv = {
  PATH: process.env.PATH, LAZYCACHE_BIN: path.resolve(lazycache), LAZYCACHE_CONFIG: '', LAZYCACHE_RUN_DIR: RUN_DIR,
  AWS_ACCESS_KEY_ID: s3.S3_ACCESS_KEY, AWS_SECRET_ACCESS_KEY: s3.S3_SECRET_KEY,
  LAZYCACHE_CACHE_DIR: '',  // set per runner below
};
const envs = [];
let lastJob = null;  // the logs of the job a failing scenario ran last
// One workspace for every job (see RunnerEnv); each job starts with it empty.
const WORKSPACE = fs.mkdtempSync(path.join(require('os').tmpdir(), 'lc-e2e-ws-'));

function step(entry, env) {
  const r = spawnSync(process.execPath, [path.join(DIST, entry)], { env, encoding: 'utf8', timeout: 120000 });
  return { status: r.status, log: (r.stdout || '') + (r.stderr || '') };
}

// One job: main, then `work` (the job's own steps), then post. Returns everything to check.
function job(inputs, { before = () => {}, work = () => {}, jobStatus = 'success' } = {}) {
  const runner = new RunnerEnv({ workspace: WORKSPACE });
  envs.push(runner);
  fs.rmSync(path.join(WORKSPACE, 'deps'), { recursive: true, force: true });
  before(path.join(WORKSPACE, 'deps'));
  const base = { ...baseEnv, LAZYCACHE_CACHE_DIR: path.join(runner.dir, 'chunks') };
  const all = { path: 'deps', ...storeInputs, ...inputs };
  const main = step('main.js', runner.env(all, base));
  const outputs = runner.outputs();
  const state = runner.state();
  const deps = path.join(runner.workspace, 'deps');
  const mountedAfterMain = lc.cacheMountPoints().has(deps);
  lastJob = { main };
  work(deps, mountedAfterMain);
  const post = step('post.js', runner.postEnv({ ...all, 'job-status': jobStatus }, base));
  lastJob.post = post;
  if (process.env.LC_E2E_SHOW) console.log(`--- main log\n${main.log}--- post log\n${post.log}--- summary\n${runner.summary()}`);
  return {
    main, post, outputs, state, deps, mountedAfterMain, mountedAfterPost: lc.cacheMountPoints().has(deps),
    summary: runner.summary(), runner,
  };
}

// A job with the sub-actions (restore/action.yml, then the job's steps, then save/action.yml
// unless `saveStep` is false, then restore's post step), as actions/cache/restore + save users
// split it. The sub-actions run the same bundles with the hidden input lazycache-step.
function splitJob(inputs, { work = () => {}, saveStep = true } = {}) {
  const runner = new RunnerEnv({ workspace: WORKSPACE });
  envs.push(runner);
  fs.rmSync(path.join(WORKSPACE, 'deps'), { recursive: true, force: true });
  const base = { ...baseEnv, LAZYCACHE_CACHE_DIR: path.join(runner.dir, 'chunks') };
  const all = { path: 'deps', ...storeInputs, ...inputs };
  const restore = step('main.js', runner.env({ ...all, 'lazycache-step': 'restore' }, base));
  const outputs = runner.outputs();
  const deps = path.join(runner.workspace, 'deps');
  const mountedAfterRestore = lc.cacheMountPoints().has(deps);
  lastJob = { main: restore };
  work(deps, mountedAfterRestore);
  const save = saveStep ? step('post.js', runner.env({ ...all, 'lazycache-step': 'save' }, base)) : null;
  const mountedAfterSave = lc.cacheMountPoints().has(deps);
  const restorePost = step('post.js', runner.postEnv({ ...all, 'lazycache-step': 'restore' }, base));
  lastJob.post = { log: `${save ? save.log : '(no save step)'}\n--- restore post:\n${restorePost.log}` };
  return {
    restore, save, restorePost, outputs, deps, mountedAfterRestore, mountedAfterSave,
    mountedAfterPost: lc.cacheMountPoints().has(deps), summary: runner.summary(),
  };
}

// Whether the entry of `key` saved for `path: deps` exists (the CLI names entries for their
// paths: lookup is given the same path the action resolves).
function lookup(key) {
  const deps = path.join(WORKSPACE, 'deps');
  const r = spawnSync(lazycache, ['lookup', ...storeArgs, '--key', key, deps], { env: { ...baseEnv, GITHUB_OUTPUT: '' }, encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  return /cache-hit=true/.test(r.stdout);
}

function fill(dir) {
  fs.mkdirSync(path.join(dir, 'pkg'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'pkg', 'index.js'), 'module.exports = 42;\n');
  fs.writeFileSync(path.join(dir, 'blob.bin'), Buffer.alloc(300000, 7));
}

function checkContents(dir) {
  assert.strictEqual(fs.readFileSync(path.join(dir, 'pkg', 'index.js'), 'utf8'), 'module.exports = 42;\n');
  assert.ok(fs.readFileSync(path.join(dir, 'blob.bin')).equals(Buffer.alloc(300000, 7)));
}

const checks = [];
function scenario(name, fn) { checks.push([name, fn]); }

const K1 = `${P}-npm-1`;

scenario('miss, the job fills the paths, post saves', () => {
  const j = job({ key: K1, 'restore-keys': `${P}-nothing-` }, { work: (d, mounted) => { assert.ok(!mounted); fill(d); } });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], undefined, 'cache-hit is not set on a miss');
  assert.strictEqual(j.outputs['cache-primary-key'], K1);
  assert.strictEqual(j.outputs['cache-matched-key'], '');
  assert.match(j.outputs['mount-time-ms'], /^\d+$/);
  const st = JSON.parse(j.state.lazycache);
  assert.strictEqual(st.key, K1);
  assert.strictEqual(st.matchedKey, '');
  assert.strictEqual(j.post.status, 0, j.post.log);
  assert.match(j.post.log, /\[command\]\S+ save /);
  assert.match(j.summary, /\| Cache hit \| miss \|/);
  assert.match(j.summary, /\| Saved \| save \(\d+ ms\) \|/);
  // The figures come from the real CLI's save --json (docs/cli.md).
  assert.match(j.summary, /\| Bytes uploaded \| [\d.]+ (B|KiB|MiB) \(2 files, 293\.0 KiB, in \d+ ms\) \|/);
  assert.ok(lookup(K1), 'the entry exists after the post step');
});

scenario('exact hit: mounted in main, unmounted in post, not saved again', () => {
  const j = job({ key: K1 }, { work: (d, mounted) => { assert.ok(mounted, 'mounted during the job'); checkContents(d); } });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], 'true');
  assert.strictEqual(j.outputs['cache-matched-key'], K1);
  assert.strictEqual(j.outputs['restore-mode'], 'mount');
  assert.strictEqual(j.post.status, 0, j.post.log);
  assert.ok(!j.mountedAfterPost, 'unmounted by the post step');
  assert.match(j.summary, /\| Cache hit \| exact \|/);
  assert.match(j.summary, /\| Restore \| mount \|/);
  // From the real CLI's mount --json and unmount --json: the entry's size, what the job fetched.
  assert.match(j.summary, /\| Mount time \| \d+ ms \(lazycache: \d+ ms\) \|/);
  assert.match(j.summary, /\| Entry size \| [\d.]+ (B|KiB|MiB) \|/);
  assert.match(j.summary, /\| Bytes fetched \| [1-9][\d.]* (B|KiB|MiB) of [\d.]+ (B|KiB|MiB) \([\d.]+%\) \|/);
  assert.match(j.summary, /\| Files opened \| [1-9]\d* \|/);
  assert.match(j.summary, /\| Saved \| no \(exact hit\) \|/);
  assert.match(j.post.log, /Cache hit occurred on the primary key/);
});

scenario('exact hit with mode: extract restores plain files', () => {
  const j = job({ key: K1, mode: 'extract' }, { work: (d, mounted) => { assert.ok(!mounted); checkContents(d); } });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], 'true');
  assert.strictEqual(j.outputs['restore-mode'], 'extract');
  assert.match(j.summary, /\| Restore \| extract \|/);
  assert.match(j.summary, /\| Restore time \| \d+ ms \(lazycache: \d+ ms\) \|/);
  assert.match(j.summary, /\| Bytes fetched \| [1-9][\d.]* (B|KiB|MiB) of [\d.]+ (B|KiB|MiB) \([\d.]+%\) \|/);
});

scenario('partial hit via restore-keys', () => {
  const K2 = `${P}-npm-2`;
  const j = job({ key: K2, 'restore-keys': `${P}-zzz-\n${P}-npm-` }, { work: (d) => checkContents(d) });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], 'false');
  assert.strictEqual(j.outputs['cache-primary-key'], K2);
  assert.strictEqual(j.outputs['cache-matched-key'], K1);
  assert.strictEqual(j.post.status, 0, j.post.log);
  assert.ok(!j.mountedAfterPost);
  assert.match(j.summary, /\| Cache hit \| partial \(restore-keys\) \|/);
  assert.match(j.summary, /\| Matched key \| .*-npm-1 \|/);
});

scenario('lookup-only sets the outputs and mounts nothing', () => {
  const j = job({ key: K1, 'lookup-only': 'true' }, { work: (d, mounted) => assert.ok(!mounted) });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], 'true');
  assert.strictEqual(j.outputs['restore-mode'], 'lookup');
  assert.ok(!fs.existsSync(path.join(j.deps, 'pkg')), 'nothing restored');
  assert.match(j.summary, /\| Saved \| no \(exact hit\) \|/);
});

scenario('fail-on-cache-miss fails the main step; post saves nothing for the failed job', () => {
  const K3 = `${P}-absent`;
  const j = job({ key: K3, 'fail-on-cache-miss': 'true' }, { jobStatus: 'failure' });
  assert.strictEqual(j.main.status, 1, j.main.log);
  assert.match(j.main.log, /::error::Failed to restore cache entry\. Exiting as fail-on-cache-miss is set\. Input key: /);
  assert.strictEqual(j.outputs['cache-hit'], undefined);
  assert.strictEqual(j.post.status, 0, j.post.log);
  assert.match(j.summary, /\| Saved \| no \(job failure; save-always is off\) \|/);
  assert.ok(!lookup(K3));
});

scenario('a failed job saves a miss only with save-always', () => {
  const K4 = `${P}-always`;
  const j = job({ key: K4, 'save-always': 'true', enableCrossOsArchive: 'true' }, { work: fill, jobStatus: 'failure' });
  assert.match(j.main.log, /::notice::enableCrossOsArchive is accepted for compatibility/);
  assert.strictEqual(j.post.status, 0, j.post.log);
  assert.match(j.summary, /\| Saved \| save \(\d+ ms\) \|/);
  assert.ok(lookup(K4));
});

scenario('an entry of the key saved for other paths is a miss, not cache-hit=true; post saves', () => {
  // Saved with two roots by hand: the job's one path names another version of the key (the CLI
  // says what it was saved for), so restore misses instead of failing to place two roots.
  const K5 = `${P}-two-roots`;
  const src = fs.mkdtempSync(path.join(require('os').tmpdir(), 'lc-e2e-src-'));
  for (const d of ['a', 'b']) fill(path.join(src, d));
  const saved = spawnSync(lazycache, ['save', ...storeArgs, '--key', K5, path.join(src, 'a'), path.join(src, 'b')],
    { env: { ...baseEnv, GITHUB_OUTPUT: '' }, encoding: 'utf8' });
  fs.rmSync(src, { recursive: true, force: true });
  assert.strictEqual(saved.status, 0, saved.stderr);
  const j = job({ key: K5, mode: 'extract' }, { work: fill });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.notStrictEqual(j.outputs['cache-hit'], 'true', 'nothing was restored');
  assert.strictEqual(j.outputs['cache-matched-key'], '');
  assert.strictEqual(j.outputs['restore-mode'], 'none');
  assert.match(j.main.log, new RegExp(`no entry for key ${K5} with these paths \\(.*deps\\) in .*; saved for: .*/a, .*/b`));
  assert.match(j.summary, /\| Cache hit \| miss \|/);
  assert.match(j.post.log, /\[command\]\S+ save /, 'the post step saves what the job made');
});

scenario('a mount that fails reports no cache-hit and leaves the directory as it was', () => {
  // mode: mount over a directory that is not empty: the mount is refused after the lookup.
  const j = job({ key: K1, mode: 'mount' }, {
    before: (d) => { fs.mkdirSync(d, { recursive: true }); fs.writeFileSync(path.join(d, 'mine.txt'), 'kept\n'); },
    work: (d, mounted) => { assert.ok(!mounted); assert.strictEqual(fs.readFileSync(path.join(d, 'mine.txt'), 'utf8'), 'kept\n'); },
  });
  assert.strictEqual(j.main.status, 0, j.main.log);
  assert.strictEqual(j.outputs['cache-hit'], undefined, 'cache-hit is not set when the mount failed');
  assert.strictEqual(j.outputs['cache-matched-key'], '');
  assert.match(j.main.log, /::warning::lazycache (restore|mount) failed/);
});

scenario('path identity: the same key for other paths is a miss, not the other job\'s tree', () => {
  // K1 was saved for `path: deps`; a job caching `path: other` under K1 must not get deps' files.
  const runner = new RunnerEnv({ workspace: WORKSPACE });
  envs.push(runner);
  const base = { ...baseEnv, LAZYCACHE_CACHE_DIR: path.join(runner.dir, 'chunks') };
  const other = path.join(WORKSPACE, 'other');
  fs.rmSync(other, { recursive: true, force: true });
  const main = step('main.js', runner.env({ ...storeInputs, key: K1, path: 'other' }, base));
  lastJob = { main };
  const outputs = runner.outputs();
  const mounted = lc.cacheMountPoints().has(other);
  const post = step('post.js', runner.postEnv({ ...storeInputs, key: K1, path: 'other', 'job-status': 'success' }, base));
  lastJob.post = post;
  assert.strictEqual(main.status, 0, main.log);
  assert.ok(!mounted, 'nothing mounted at the other path');
  assert.strictEqual(outputs['cache-hit'], undefined, 'a miss');
  assert.strictEqual(outputs['cache-matched-key'], '');
  assert.ok(!fs.existsSync(path.join(other, 'pkg')), 'deps\' files are not under the other path');
  fs.rmSync(other, { recursive: true, force: true });
});

const KS = `${P}-split`;

scenario('sub-actions: restore misses, the job fills, save saves, restore post has nothing to do', () => {
  const j = splitJob({ key: KS }, { work: (d, mounted) => { assert.ok(!mounted); fill(d); } });
  assert.strictEqual(j.restore.status, 0, j.restore.log);
  assert.strictEqual(j.outputs['cache-hit'], undefined);
  assert.strictEqual(j.outputs['cache-primary-key'], KS);
  assert.strictEqual(j.save.status, 0, j.save.log);
  assert.match(j.save.log, /\[command\]\S+ save /);
  assert.match(j.restorePost.log, /Nothing to unmount/);
  assert.ok(lookup(KS), 'the save step saved the entry');
  assert.match(j.summary, /\| Saved \| save \(\d+ ms\) \|/);
});

scenario('sub-actions: restore mounts, save unmounts (nothing changed: not saved again)', () => {
  const j = splitJob({ key: KS }, { work: (d, mounted) => { assert.ok(mounted, 'the restore step mounted'); checkContents(d); } });
  assert.strictEqual(j.restore.status, 0, j.restore.log);
  assert.strictEqual(j.outputs['cache-hit'], 'true');
  assert.strictEqual(j.outputs['restore-mode'], 'mount');
  assert.strictEqual(j.save.status, 0, j.save.log);
  assert.match(j.save.log, /\[command\]\S+ unmount --save /);
  assert.match(j.save.log, /nothing changed/);
  assert.ok(!j.mountedAfterSave, 'the save step unmounted');
  assert.match(j.restorePost.log, /Nothing to unmount/);
});

scenario('sub-actions: restore without a save step: its post step unmounts, saves nothing', () => {
  const j = splitJob({ key: KS }, { saveStep: false, work: (d, mounted) => assert.ok(mounted) });
  assert.strictEqual(j.restorePost.status, 0, j.restorePost.log);
  assert.ok(!j.mountedAfterPost, 'restore post unmounted');
  assert.doesNotMatch(j.restorePost.log, /\[command\]\S+ (save|unmount --save) /);
  assert.match(j.summary, /\| Saved \| no \(restore step; the save step saves\) \|/);
});

scenario('sub-actions: restore with lookup-only mounts nothing', () => {
  const j = splitJob({ key: KS, 'lookup-only': 'true' }, { saveStep: false, work: (d, mounted) => assert.ok(mounted === false) });
  assert.strictEqual(j.outputs['cache-hit'], 'true');
  assert.strictEqual(j.outputs['restore-mode'], 'lookup');
  assert.match(j.restorePost.log, /Nothing to unmount/);
});

let failed = 0;
for (const [name, fn] of checks) {
  lastJob = null;
  try {
    fn();
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}\n${e.stack}`);
    if (lastJob) console.log(`--- main step log:\n${lastJob.main.log}\n--- post step log:\n${lastJob.post ? lastJob.post.log : '(not run)'}`);
  }
}
// Leave no mount behind, whatever failed.
for (const r of envs) {
  const deps = path.join(r.workspace, 'deps');
  if (lc.cacheMountPoints().has(deps)) spawnSync(lazycache, ['unmount', '--lazy', deps], { env: baseEnv });
  if (!failed) r.cleanup();
}
if (!failed && !lc.cacheMountPoints().has(path.join(WORKSPACE, 'deps'))) fs.rmSync(WORKSPACE, { recursive: true, force: true });
if (localStore && !failed) fs.rmSync(localStore, { recursive: true, force: true });
if (!failed) fs.rmSync(RUN_DIR, { recursive: true, force: true });
console.log(`${checks.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
