// Package bench measures kubeskills against a real kube-apiserver and etcd
// (internal/testenv), each figure beside a baseline measured in the same run
// on the same API server: see BENCHMARKS.md and `make bench`.
//
// The benchmarks are behind the `bench` build tag, so `go test ./...` never
// builds them. Each Benchmark is one large batch: run them with
// -benchtime=1x. They report their figures with b.ReportMetric, and
// test/bench/cmd/report runs them, together with the policy benchmarks of
// internal/policy, and writes the table of BENCHMARKS.md.
//
//	go test -tags bench -run '^$' -bench . -benchtime 1x -timeout 14m ./test/bench/
//
// The manager-footprint benchmark builds cmd/manager and runs it as a
// process of its own, against an API server of its own.
//
// Two variables help find where the time goes:
//
//   - KUBESKILLS_BENCH_PROFILE_DIR: a folder where the benchmarks write CPU
//     profiles of the API server (while Skills are created) and CPU and
//     heap profiles of the manager process (at rest and during the update).
//   - KUBESKILLS_BENCH_MANAGER_ENV: variables added to the manager
//     process's environment only, such as GOMEMLIMIT=120MiB.
//
// findings.md, the profiles and the fixes they led to, is appended to
// BENCHMARKS.md after the table.
package bench
