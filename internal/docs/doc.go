// Package docs holds no code: its test checks that every relative link in
// the repository's Markdown (README.md, docs/*.md, BENCHMARKS.md,
// CHANGELOG.md) reaches a file that exists and, with a #fragment, a
// heading that file has.
package docs
