// SPDX-License-Identifier: MIT
// A runner environment as GitHub's runner sets it up for a JavaScript action: real files for
// GITHUB_OUTPUT, GITHUB_STATE, GITHUB_ENV and GITHUB_STEP_SUMMARY, INPUT_* variables, and
// STATE_* for the post step (what the runner does between the two steps).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const core = require('../src/core');

class RunnerEnv {
  // `workspace`: share one GITHUB_WORKSPACE between jobs, as a runner reuses the same
  // /home/runner/work/REPO/REPO for every job of a repository (cache paths are absolute there).
  constructor({ workspace } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-runner-'));
    this.files = {};
    for (const name of ['GITHUB_OUTPUT', 'GITHUB_STATE', 'GITHUB_ENV', 'GITHUB_STEP_SUMMARY']) {
      this.files[name] = path.join(this.dir, name.toLowerCase());
      fs.writeFileSync(this.files[name], '');
    }
    this.workspace = workspace || path.join(this.dir, 'workspace');
    this.home = path.join(this.dir, 'home');
    this.temp = path.join(this.dir, 'runner_temp');
    for (const d of [this.workspace, this.home, this.temp]) fs.mkdirSync(d, { recursive: true });
  }

  // The environment of a step: `base` plus the runner's variables plus INPUT_* for `inputs`.
  env(inputs = {}, base = process.env) {
    const env = {};
    for (const [k, v] of Object.entries(base)) if (!k.startsWith('INPUT_') && !k.startsWith('STATE_')) env[k] = v;
    Object.assign(env, this.files, {
      GITHUB_WORKSPACE: this.workspace, HOME: this.home, RUNNER_TEMP: this.temp, GITHUB_ACTIONS: 'true',
    });
    for (const [k, v] of Object.entries(inputs)) env[`INPUT_${k.replace(/ /g, '_').toUpperCase()}`] = v;
    return env;
  }

  // The post step's environment: the main step's saved state becomes STATE_<name>.
  postEnv(inputs = {}, base = process.env) {
    const env = this.env(inputs, base);
    for (const [k, v] of Object.entries(this.state())) env[`STATE_${k}`] = v;
    return env;
  }

  read(name) { return fs.readFileSync(this.files[name], 'utf8'); }
  outputs() { return core.parseFileCommands(this.read('GITHUB_OUTPUT')); }
  state() { return core.parseFileCommands(this.read('GITHUB_STATE')); }
  summary() { return this.read('GITHUB_STEP_SUMMARY'); }
  cleanup() { fs.rmSync(this.dir, { recursive: true, force: true }); }
}

// Runs fn with process.env replaced by env, restoring it afterwards.
async function withEnv(env, fn) {
  const saved = process.env;
  process.env = env;
  try {
    return await fn();
  } finally {
    process.env = saved;
  }
}

module.exports = { RunnerEnv, withEnv };
