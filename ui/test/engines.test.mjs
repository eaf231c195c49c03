// The console's npm packages run on the Node.js a fresh Debian 12 gets:
// `make deps` installs Debian's nodejs and npm when there is no npm, and
// bookworm's nodejs is 18 (18.20.4+dfsg-1~deb12u2). playwright-core from
// 1.62 on requires Node.js 20 and exits at import on 18, which failed the
// console's browser test (make test-ui) on such a machine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const debianNode = [18, 20, 4];

// atLeast reports whether version a >= b, each [major, minor, patch].
function atLeast(a, b) {
  for (let i = 0; i < 3; i++) {
    if (a[i] !== b[i]) return a[i] > b[i];
  }
  return true;
}

// accepts reports whether engines.node (">=X[.Y[.Z]]", the only form the
// lockfile has; any other fails the test rather than pass unread) allows
// version v.
function accepts(range, v) {
  const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  assert.ok(m, `engines.node ${JSON.stringify(range)}: not a form this check reads`);
  return atLeast(v, [+m[1], +(m[2] ?? 0), +(m[3] ?? 0)]);
}

test("every package in the lockfile runs on Debian 12's Node.js", async () => {
  const lock = JSON.parse(await readFile(join(here, "..", "package-lock.json"), "utf8"));
  const refused = [];
  for (const [path, pkg] of Object.entries(lock.packages)) {
    const range = pkg.engines?.node;
    if (path !== "" && range && !accepts(range, debianNode)) {
      refused.push(`${path}@${pkg.version} needs node ${range}`);
    }
  }
  assert.deepEqual(refused, [], `Debian 12's nodejs is ${debianNode.join(".")}`);
});

test("the check refuses a package that needs a newer Node.js", () => {
  assert.equal(accepts(">=20", debianNode), false);
  assert.equal(accepts(">=18.21", debianNode), false);
  assert.equal(accepts(">=18", debianNode), true);
  assert.equal(accepts(">=14.17", debianNode), true);
  assert.throws(() => accepts("^20 || ^22", debianNode));
});
