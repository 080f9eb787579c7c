// SPDX-License-Identifier: MIT
// The CLI's stderr (its messages and progress lines) reaches the step's log while the command
// runs, not when it ends: a stand-in lazycache writes a progress line, then waits until the test
// has seen it in the log (a file it polls for) before exiting. Buffered output would never show
// it in time and the child would wait forever (the test fails on its timeout instead).
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');

test('lc.run streams the child\'s stderr into the log as it is written', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-stream-'));
  const go = path.join(dir, 'go');
  const bin = path.join(dir, 'lazycache');
  fs.writeFileSync(bin, `#!/bin/sh
echo 'lazycache save: 1.0 MiB of 4.0 MiB (25%)' >&2
i=0; while [ ! -e '${go}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
[ -e '${go}' ] || { echo 'never released' >&2; exit 9; }
echo '{"saved":true}'
`, { mode: 0o755 });
  const harness = `const lc = require(${JSON.stringify(path.join(__dirname, '..', 'src', 'lazycache'))});
    const r = lc.run(${JSON.stringify(bin)}, ['save']); process.exitCode = r.status;`;
  const child = spawn(process.execPath, ['-e', harness], { env: { ...process.env, RUNNER_TEMP: dir } });
  let log = '';
  const seenWhileRunning = new Promise((resolve) => {
    const onData = (d) => {
      log += d;
      if (log.includes('1.0 MiB of 4.0 MiB')) {
        fs.writeFileSync(go, '');
        resolve(true);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
  });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  assert.strictEqual(await seenWhileRunning, true);
  assert.strictEqual(await exited, 0, log);
  assert.match(log, /\{"saved":true\}/, 'stdout is echoed when the command ends');
  fs.rmSync(dir, { recursive: true, force: true });
});
