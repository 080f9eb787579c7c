// SPDX-License-Identifier: MIT
// Input validation as actions/cache does it, path resolution, and the CLI arguments built.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { readInputs, storeArgs, keyArgs, storeUrl } = require('../src/inputs');
const { RunnerEnv, withEnv } = require('../testing/runner_env');

test('paths: ~ is HOME, relative is under the workspace, trailing slashes dropped', async () => {
  const r = new RunnerEnv();
  const inputs = await withEnv(r.env({ key: 'k', path: '~/.npm\nnode_modules/\n/abs/dir' }), () => readInputs());
  assert.deepStrictEqual(inputs.paths, [path.join(r.home, '.npm'), path.join(r.workspace, 'node_modules'), '/abs/dir']);
  assert.strictEqual(inputs.mode, 'auto');
  r.cleanup();
});

test('key validation: length, commas, at most 10 keys, globs refused', async () => {
  const r = new RunnerEnv();
  const bad = [
    [{ key: 'x'.repeat(513), path: 'a' }, /Key cannot be larger than 512 characters/],
    [{ key: 'a,b', path: 'a' }, /Key cannot contain commas/],
    [{ key: 'k', path: 'a', 'restore-keys': Array.from({ length: 10 }, (_, i) => `p${i}-`).join('\n') }, /maximum of 10/],
    [{ key: 'k', path: 'src/**/*.o' }, /glob patterns .* are not supported/],
    [{ key: 'k', path: 'a', mode: 'fast' }, /mode must be one of auto, mount, extract/],
    [{ key: 'k', path: 'a', 'upload-chunk-size': '64MB' }, /upload-chunk-size must be a number of bytes/],
    [{ path: 'a' }, /Input required and not supplied: key/],
  ];
  for (const [inputs, re] of bad) {
    await withEnv(r.env(inputs), () => assert.throws(() => readInputs(), re, JSON.stringify(inputs).slice(0, 60)));
  }
  r.cleanup();
});

test('store arguments: store wins over bucket; bucket+prefix make s3://; scope and restore keys pass through', async () => {
  const r = new RunnerEnv();
  await withEnv(r.env({
    key: 'npm-1', path: 'a', bucket: 'b', prefix: '/ci/', endpoint: 'http://127.0.0.1:9000', region: 'r1',
    'restore-keys': 'npm-\nnode-', scope: 'org/repo',
  }), () => {
    const i = readInputs();
    assert.strictEqual(storeUrl(i), 's3://b/ci');
    assert.deepStrictEqual(storeArgs(i), ['--store', 's3://b/ci', '--endpoint', 'http://127.0.0.1:9000', '--region', 'r1']);
    assert.deepStrictEqual(keyArgs(i), ['--key', 'npm-1', '--restore-keys', 'npm-', '--restore-keys', 'node-', '--scope', 'org/repo']);
    assert.deepStrictEqual(keyArgs(i, { withRestoreKeys: false }), ['--key', 'npm-1', '--scope', 'org/repo']);
  });
  await withEnv(r.env({ key: 'k', path: 'a', bucket: 'b', store: 'file:///srv/cache' }), () => {
    assert.deepStrictEqual(storeArgs(readInputs()), ['--store', 'file:///srv/cache']);
  });
  await withEnv(r.env({ key: 'k', path: 'a' }), () => assert.deepStrictEqual(storeArgs(readInputs()), []));
  r.cleanup();
});

test('path identity is the CLI\'s: no scheme of the action\'s own in the key arguments', async () => {
  // The CLI names an entry for the PATHs it is given (its version, docs/stores.md); an extra
  // version in --scope would make every entry miss the CLI's own lookups and list as a scope.
  const r = new RunnerEnv();
  await withEnv(r.env({ key: 'k', path: 'node_modules' }), () => {
    assert.deepStrictEqual(keyArgs(readInputs()), ['--key', 'k']);
  });
  r.cleanup();
});
