// SPDX-License-Identifier: MIT
// core.js against a runner's files: inputs, the delimiter syntax both ways, state, summary.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const core = require('../src/core');
const { RunnerEnv, withEnv } = require('../testing/runner_env');

test('inputs: INPUT_ names keep dashes, values are trimmed, booleans compare to "true"', async () => {
  const r = new RunnerEnv();
  await withEnv(r.env({ 'restore-keys': ' a-\n\n  b-  \n', 'lookup-only': 'TRUE', 'fail-on-cache-miss': 'yes', key: ' k ' }), () => {
    assert.deepStrictEqual(core.getMultilineInput('restore-keys'), ['a-', 'b-']);
    assert.strictEqual(core.getBooleanInput('lookup-only'), true);
    assert.strictEqual(core.getBooleanInput('fail-on-cache-miss'), false);
    assert.strictEqual(core.getInput('key'), 'k');
    assert.throws(() => core.getInput('path', { required: true }), /Input required and not supplied: path/);
  });
  r.cleanup();
});

test('outputs and state use the multiline delimiter syntax and read back exactly', async () => {
  const r = new RunnerEnv();
  const tricky = 'line1\nline2 with = and <<EOF\n\nlast';
  await withEnv(r.env(), () => {
    core.setOutput('cache-hit', 'true');
    core.setOutput('multi', tricky);
    core.setOutput('empty', '');
    core.saveState('lazycache', JSON.stringify({ a: 1 }));
  });
  const text = r.read('GITHUB_OUTPUT');
  assert.match(text, /^cache-hit<<ghadelimiter_[0-9a-f-]{36}\ntrue\nghadelimiter_[0-9a-f-]{36}\n/);
  assert.deepStrictEqual(r.outputs(), { 'cache-hit': 'true', multi: tricky, empty: '' });
  assert.deepStrictEqual(r.state(), { lazycache: '{"a":1}' });
  // The post step sees the state as STATE_*.
  await withEnv(r.postEnv(), () => assert.strictEqual(core.getState('lazycache'), '{"a":1}'));
  r.cleanup();
});

test('parseFileCommands reads the CLI\'s plain k=v lines and rejects garbage', () => {
  assert.deepStrictEqual(core.parseFileCommands('cache-hit=false\ncache-matched-key=a=b\n'),
    { 'cache-hit': 'false', 'cache-matched-key': 'a=b' });
  assert.throws(() => core.parseFileCommands('k<<EOF\nunterminated\n'), /unterminated value for k/);
  assert.throws(() => core.parseFileCommands('no separator\n'), /not a file-command line/);
});

test('writing without the runner file fails with the variable\'s name', async () => {
  const r = new RunnerEnv();
  const env = r.env();
  delete env.GITHUB_OUTPUT;
  await withEnv(env, () => assert.throws(() => core.setOutput('x', 'y'), /GITHUB_OUTPUT is not set/));
  r.cleanup();
});

test('summary table escapes pipes and newlines; annotations escape %, CR, LF', async () => {
  const r = new RunnerEnv();
  await withEnv(r.env(), () => {
    assert.strictEqual(core.appendSummaryTable('lazycache', [['Primary key', 'a|b'], ['Note', 'x\ny']]), true);
  });
  assert.strictEqual(r.summary(), '### lazycache\n\n| | |\n|---|---|\n| Primary key | a\\|b |\n| Note | x y |\n\n');
  assert.strictEqual(core.escapeData('50%\r\nok'), '50%25%0D%0Aok');
  r.cleanup();
});
