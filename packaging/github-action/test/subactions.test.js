// SPDX-License-Identifier: MIT
// restore/ and save/ (actions/cache/restore and /save's split) take the main action's inputs
// with the same descriptions and defaults, restore/ has its outputs, and every file they run
// exists in dist/.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');

const ROOT = path.join(__dirname, '..');

// { inputs: {name: text}, outputs: {name: text}, runs: text } of an action.yml (two-space YAML
// as these files are written: a section, then "  name:" blocks).
function sections(file) {
  const out = { inputs: {}, outputs: {}, runs: '' };
  let section = '';
  let name = '';
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const top = /^([a-z]+):/.exec(line);
    if (top) { section = top[1]; name = ''; continue; }
    if (section === 'runs') { out.runs += `${line}\n`; continue; }
    if (!out[section] || /^\s*#/.test(line) || !line.trim()) continue;
    const item = /^  ([\w-]+):\s*$/.exec(line);
    if (item) { name = item[1]; out[section][name] = ''; continue; }
    if (name) out[section][name] += `${line.trim()}\n`;
  }
  return out;
}

const main = sections(path.join(ROOT, 'action.yml'));

for (const [sub, dropped] of [['restore', ['save-always', 'upload-chunk-size']],
  ['save', ['restore-keys', 'lookup-only', 'fail-on-cache-miss', 'save-always', 'mode', 'job-status']]]) {
  test(`${sub}/action.yml has the main action's inputs${sub === 'restore' ? ' and outputs' : ''}`, () => {
    const s = sections(path.join(ROOT, sub, 'action.yml'));
    const want = Object.keys(main.inputs).filter((n) => !dropped.includes(n));
    assert.deepStrictEqual(Object.keys(s.inputs).filter((n) => n !== 'lazycache-step'), want);
    for (const n of want) assert.strictEqual(s.inputs[n], main.inputs[n], `input ${n} differs from action.yml's`);
    assert.match(s.inputs['lazycache-step'], new RegExp(`default: '${sub}'`));
    if (sub === 'restore') assert.deepStrictEqual(s.outputs, main.outputs);
    for (const m of s.runs.matchAll(/(?:main|post): (\S+)/g)) {
      assert.ok(fs.existsSync(path.join(ROOT, sub, m[1])), `${sub}/action.yml runs ${m[1]}, which does not exist`);
    }
  });
}
