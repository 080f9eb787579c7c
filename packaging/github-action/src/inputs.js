// SPDX-License-Identifier: MIT
// The action's inputs: actions/cache's names and meanings (path, key, restore-keys, lookup-only,
// fail-on-cache-miss, enableCrossOsArchive, save-always, upload-chunk-size) plus the store
// settings, validated the way actions/cache validates them, and turned into CLI arguments.
'use strict';

const os = require('os');
const path = require('path');
const core = require('./core');

const MAX_KEY_LENGTH = 512;  // actions/cache: longer keys are a validation error
const MAX_KEYS = 10;         // key plus restore-keys
const MODES = ['auto', 'mount', 'extract'];

function validateKey(key, what) {
  if (key.length > MAX_KEY_LENGTH) {
    throw new Error(`${what} cannot be larger than ${MAX_KEY_LENGTH} characters (got ${key.length}): ${key.slice(0, 40)}...`);
  }
  if (key.includes(',')) throw new Error(`${what} cannot contain commas: ${key}`);
}

// "~/x" and relative paths as actions/cache resolves them (home, then the workspace).
function resolvePath(p, env = process.env) {
  if (/[*?[\]]/.test(p) || p.startsWith('!')) {
    throw new Error(`path "${p}": lazycache mounts directories, glob patterns and "!" exclusions are not supported; `
      + 'list the directories themselves');
  }
  let out = p;
  if (out === '~' || out.startsWith('~/')) out = path.join(env.HOME || os.homedir(), out.slice(1));
  if (!path.isAbsolute(out)) out = path.join(env.GITHUB_WORKSPACE || process.cwd(), out);
  return path.normalize(out).replace(/(.)\/+$/, '$1');
}

// Reads and validates every input. Throws Error with a message that names the input.
function readInputs(env = process.env) {
  const key = core.getInput('key', { required: true });
  const restoreKeys = core.getMultilineInput('restore-keys');
  validateKey(key, 'Key');
  for (const k of restoreKeys) validateKey(k, 'Restore key');
  if (1 + restoreKeys.length > MAX_KEYS) {
    throw new Error(`Key Validation Error: Keys are limited to a maximum of ${MAX_KEYS} (key plus restore-keys).`);
  }
  const rawPaths = core.getMultilineInput('path', { required: true });
  const paths = rawPaths.map((p) => resolvePath(p, env));
  const mode = (core.getInput('mode') || 'auto').toLowerCase();
  if (!MODES.includes(mode)) throw new Error(`mode must be one of ${MODES.join(', ')}, not "${mode}"`);
  const uploadChunkSize = core.getInput('upload-chunk-size');
  if (uploadChunkSize && !/^\d+$/.test(uploadChunkSize)) {
    throw new Error(`upload-chunk-size must be a number of bytes, not "${uploadChunkSize}"`);
  }
  return {
    key,
    restoreKeys,
    paths,
    lookupOnly: core.getBooleanInput('lookup-only'),
    failOnCacheMiss: core.getBooleanInput('fail-on-cache-miss'),
    enableCrossOsArchive: core.getBooleanInput('enableCrossOsArchive'),
    saveAlways: core.getBooleanInput('save-always'),
    uploadChunkSize: uploadChunkSize ? Number(uploadChunkSize) : 0,
    mode,
    store: core.getInput('store'),
    bucket: core.getInput('bucket'),
    prefix: core.getInput('prefix'),
    endpoint: core.getInput('endpoint'),
    region: core.getInput('region'),
    scope: core.getInput('scope'),
    deb: core.getInput('deb'),
  };
}

// The store URL the inputs name: `store` wins, else s3://bucket/prefix, else "" (the CLI then
// uses LAZYCACHE_STORE, /etc/lazycache/config or its local default).
function storeUrl(inputs) {
  if (inputs.store) return inputs.store;
  if (!inputs.bucket) return '';
  const prefix = inputs.prefix.replace(/^\/+|\/+$/g, '');
  return `s3://${inputs.bucket}${prefix ? `/${prefix}` : ''}`;
}

// --store/--endpoint/--region: the options every store-facing command shares.
function storeArgs(inputs) {
  const args = [];
  const url = storeUrl(inputs);
  if (url) args.push('--store', url);
  if (inputs.endpoint) args.push('--endpoint', inputs.endpoint);
  if (inputs.region) args.push('--region', inputs.region);
  return args;
}

// --key/--restore-keys/--scope. The paths are not in here: the CLI makes them part of the entry's
// identity itself (its version, docs/stores.md), from the PATHs every command is given, so the
// action passes them to restore, lookup and save and adds no scheme of its own.
function keyArgs(inputs, { withRestoreKeys = true } = {}) {
  const args = ['--key', inputs.key];
  if (withRestoreKeys) for (const k of inputs.restoreKeys) args.push('--restore-keys', k);
  if (inputs.scope) args.push('--scope', inputs.scope);
  return args;
}

module.exports = {
  readInputs, storeUrl, storeArgs, keyArgs, resolvePath, validateKey, MAX_KEY_LENGTH,
};
