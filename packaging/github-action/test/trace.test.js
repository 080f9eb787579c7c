// SPDX-License-Identifier: MIT
// On a miss the main step starts `lazycache trace start PATH...` with a run directory of the job,
// and the post step's save gets that run directory (so it finds the trace); a post step that does
// not save discards the trace. A stand-in lazycache logs each call with its LAZYCACHE_RUN_DIR.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { RunnerEnv } = require('../testing/runner_env');

function fakeCli(dir) {
  const bin = path.join(dir, 'lazycache');
  fs.writeFileSync(bin, `#!/bin/sh
[ "$2" = --help ] && exit 0
case "$1" in
  --help) printf 'commands:\\n  restore  x\\n  save  x\\n  trace  x\\n\\n' ;;
  --version) echo 'lazycache 0.0.0-fake' ;;
  restore) exit 3 ;;
  *) echo "$* run_dir=$LAZYCACHE_RUN_DIR" >> "${dir}/calls" ;;
esac
`, { mode: 0o755 });
  return bin;
}

function steps(jobStatus) {
  const runner = new RunnerEnv();
  const bin = fakeCli(runner.dir);
  const inputs = { path: 'deps', key: 'k', store: 'file:///nonexistent', mode: 'extract' };
  const base = { PATH: process.env.PATH, LAZYCACHE_BIN: bin };
  for (const [step, env] of [['main.js', runner.env(inputs, base)], ['post.js', null]]) {
    const e = env || runner.postEnv({ ...inputs, 'job-status': jobStatus }, base);
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'dist', step)], { env: e, encoding: 'utf8' });
    assert.strictEqual(r.status, 0, r.stdout + r.stderr);
  }
  const calls = fs.readFileSync(path.join(runner.dir, 'calls'), 'utf8').trim().split('\n');
  return { runner, calls };
}

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

test('a miss is traced and the post step saves with the trace\'s run directory', { skip: !asRoot && 'needs root (else sudo)' }, () => {
  const { runner, calls } = steps('success');
  try {
    const runDir = path.join(runner.temp, 'lazycache-trace');
    const deps = path.join(runner.workspace, 'deps');
    assert.strictEqual(calls[0], `trace start ${deps} run_dir=${runDir}`);
    assert.match(calls[1], new RegExp(`^save .*--key k .*${deps} run_dir=${runDir}$`));
    assert.strictEqual(calls.length, 2, calls.join('\n'));
  } finally {
    runner.cleanup();
  }
});

test('a failed job is not saved and its trace is discarded', { skip: !asRoot && 'needs root (else sudo)' }, () => {
  const { runner, calls } = steps('failure');
  try {
    const deps = path.join(runner.workspace, 'deps');
    assert.match(calls[1], new RegExp(`^trace stop --discard ${deps} run_dir=`));
    assert.strictEqual(calls.length, 2, calls.join('\n'));
  } finally {
    runner.cleanup();
  }
});
