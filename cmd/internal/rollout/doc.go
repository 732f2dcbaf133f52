// Package rollout holds the tests that the services' migrations are safe
// with replicas, run against the real binaries and the real Postgres: two
// processes of a service starting at once on a fresh database both come
// up and migrate it once; the binary of a service's previous release
// (from git history) keeps serving while the current one migrates the
// database under it; and no new migration contracts the schema an older
// release still reads (docs/conventions.md, "Migrations"). The package
// has no code of its own.
package rollout
