// Builds the console into the directory given (dist by default):
// app.js bundled from src/ and style.css minified by esbuild, and
// index.html as it is. The output depends only on the sources and the lockfile's
// esbuild, so `make test` can rebuild it elsewhere and compare.
import { build } from "esbuild";
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, "dist");

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  absWorkingDir: here,
  entryPoints: ["src/main.ts"],
  outfile: join(out, "app.js"),
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
await build({
  absWorkingDir: here,
  entryPoints: ["style.css"],
  outfile: join(out, "style.css"),
  minify: true,
  charset: "utf8",
  logLevel: "warning",
});
await copyFile(join(here, "index.html"), join(out, "index.html"));
