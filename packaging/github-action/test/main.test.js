// SPDX-License-Identifier: MIT
// The main step's outputs when the CLI fails after it found an entry: a stand-in lazycache that
// prints the outputs of an exact hit (stdout and $GITHUB_OUTPUT) and then exits 3 or 1, as a CLI
// that printed them before a failed extract or mount did. The step must report a miss.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { RunnerEnv } = require('../testing/runner_env');

function fakeCli(dir, restoreExit) {
  const bin = path.join(dir, 'lazycache');
  fs.writeFileSync(bin, `#!/bin/sh
case "$1" in
  --help) printf 'commands:\\n  doctor   x\\n  restore  x\\n\\n' ;;
  --version) echo 'lazycache 0.0.0-fake' ;;
  doctor) echo '{"fuse_usable":false,"fuse_reason":"fake"}' ;;
  restore)
    if [ "$2" = --help ]; then echo '  --mode M'; exit 0; fi
    printf 'cache-hit=true\\ncache-primary-key=k\\ncache-matched-key=k\\n' | tee -a "$GITHUB_OUTPUT"
    echo 'lazycache restore: extract failed' >&2
    exit ${restoreExit} ;;
esac
`, { mode: 0o755 });
  return bin;
}

for (const code of [3, 1]) {
  test(`restore exit ${code} after printing a hit: the step reports a miss, not cache-hit=true`, () => {
    const runner = new RunnerEnv();
    try {
      const bin = fakeCli(runner.dir, code);
      const env = runner.env({ path: 'deps', key: 'k', store: 'file:///nonexistent' },
        { PATH: process.env.PATH, LAZYCACHE_BIN: bin });
      const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'dist', 'main.js')], { env, encoding: 'utf8' });
      assert.strictEqual(r.status, 0, r.stdout + r.stderr);
      const out = runner.outputs();
      assert.strictEqual(out['cache-hit'], undefined, `cache-hit must not be set: ${JSON.stringify(out)}`);
      assert.strictEqual(out['cache-matched-key'], '');
      assert.strictEqual(out['restore-mode'], 'none');
      assert.strictEqual(JSON.parse(runner.state().lazycache).matchedKey, '', 'post must see a miss (and save)');
    } finally {
      runner.cleanup();
    }
  });
}
