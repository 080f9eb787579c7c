// SPDX-License-Identifier: MIT
// Helpers of the CLI driver that need no CLI: figures, sizes, mountinfo parsing, dist freshness.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const lc = require('../src/lazycache');

// unmount --json's objects as the CLI prints them (docs/cli.md; the e2e tests read the real ones).
test('sumJsonFigures adds the stats of unmount --json, one daemon once', () => {
  const text = 'unmounted /a\n{"path":"/a","stats":{"archive_bytes":100,"store_bytes":10,"uptime_seconds":1.5}}\n'
    + '{"path":"/b","stats":{"archive_bytes":200,"store_bytes":5,"uptime_seconds":2}}\n'
    + '{"path":"/c","stats":{"archive_bytes":200,"store_bytes":5,"uptime_seconds":2}}\nnot json {\n';
  assert.deepStrictEqual(lc.sumJsonFigures(text), { archive_bytes: 300, store_bytes: 15, uptime_seconds: 3.5 });
});

// The table the CLI's human_bytes is tested against too (tests/common/byte_format_test.cpp).
test('formatBytes prints every row of the shared table as the CLI does', () => {
  const table = path.join(__dirname, '..', '..', '..', 'tests', 'common', 'byte_format_cases.txt');
  let rows = 0;
  for (const line of fs.readFileSync(table, 'utf8').split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [bytes, text] = line.split('\t');
    assert.strictEqual(lc.formatBytes(Number(bytes)), text, `row ${line}`);
    rows++;
  }
  assert.ok(rows >= 10, 'the table was read');
  assert.strictEqual(lc.formatBytes(NaN), '');
  assert.strictEqual(lc.formatBytes(-1), '');
});

test('cacheMountPoints reads FUSE mounts and lazycache overlays from mountinfo, with octal escapes', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-mi-'));
  const f = path.join(dir, 'mountinfo');
  fs.writeFileSync(f, [
    '36 35 98:0 / /mnt/a\\040b rw,nosuid - fuse.lazycache lazycache rw,user_id=0',
    '37 35 98:0 / /home/u/.npm rw - fuse lazycache rw',
    '38 35 8:1 / / rw - ext4 /dev/sda1 rw',
    '39 35 0:40 / /w/node_modules rw - overlay lazycache rw,lowerdir=/l,upperdir=/u,workdir=/w',
    '40 35 0:41 / /w/other rw - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w',
  ].join('\n'));
  assert.deepStrictEqual([...lc.cacheMountPoints(f)].sort(), ['/home/u/.npm', '/mnt/a b', '/w/node_modules']);
  assert.strictEqual(lc.cacheMountPoints(path.join(dir, 'missing')).size, 0);
  fs.rmSync(dir, { recursive: true });
});

test('findLazycache honours LAZYCACHE_BIN, then PATH, and wants an executable', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-bin-'));
  const bin = path.join(dir, 'lazycache');
  fs.writeFileSync(bin, '#!/bin/sh\n');
  assert.strictEqual(lc.findLazycache({ PATH: dir }), '');  // not executable
  fs.chmodSync(bin, 0o755);
  assert.strictEqual(lc.findLazycache({ PATH: `/nonexistent:${dir}` }), bin);
  assert.strictEqual(lc.findLazycache({ LAZYCACHE_BIN: bin, PATH: '' }), bin);
  assert.strictEqual(lc.findLazycache({ LAZYCACHE_BIN: path.join(dir, 'nope'), PATH: dir }), '');
  fs.rmSync(dir, { recursive: true });
});

test('committed dist/ is what build.js makes from src/', () => {
  const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'build.js'), '--check'], { encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
});

test('dist entry points run with no node_modules and fail cleanly without inputs', () => {
  const env = { PATH: process.env.PATH };
  for (const entry of ['main.js', 'post.js']) {
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'dist', entry)], { encoding: 'utf8', env });
    if (entry === 'main.js') {
      assert.strictEqual(r.status, 1);
      assert.match(r.stdout, /::error::Input required and not supplied: key/);
    } else {
      assert.strictEqual(r.status, 0);
      assert.match(r.stdout, /Nothing to do: the main step did not get as far as restoring/);
    }
  }
});
