//go:build bench

package bench

import (
	"context"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// skillCount is the size of the Skill batches.
const skillCount = 1000

// servedSkills is the namespace where BenchmarkSkillThroughput left
// skillCount served Skills of batch "throughput", for the Agent benchmark.
var servedSkills string

// BenchmarkSkillThroughput applies 1,000 Skills and waits until every one is
// Ready with its ConfigMap; then updates all of them and waits again. The
// floor is the same 1,000 ConfigMaps applied directly by the client, with as
// many writers, on the same API server, while the operator runs.
//
// Metrics: create-s and update-s (operator), floor-create-s and
// floor-update-s (baseline), their ratios, and the time the client's Skill
// writes alone took (writes-create-s, writes-update-s).
func BenchmarkSkillThroughput(b *testing.B) {
	ctx := context.Background()
	e := operatorEnv(b)
	for b.Loop() {
		floorNS, opNS := e.Namespace(b), e.Namespace(b)

		floor := func(rev int) time.Duration {
			cms := make([]*corev1ac.ConfigMapApplyConfiguration, skillCount)
			for i := range skillCount {
				cms[i] = servedConfigMap(b, benchSkill(floorNS, "floor", i, 1, rev))
			}
			start := time.Now()
			if err := parallel(skillCount, func(i int) error {
				return e.Client.Apply(ctx, cms[i], fieldOwner, client.ForceOwnership)
			}); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}

		// Where each phase's time goes: the CPU of the API server, of etcd
		// and of this process (operator and client), and the writes made.
		cpu, reqs := shared.cpu.sample(), requestCounts(b, e)
		phase := func(name string) {
			now, nowReqs := shared.cpu.sample(), requestCounts(b, e)
			used := now.sub(cpu)
			b.Logf("%s: %s; requests: %s", name, used, requestDiff(reqs, nowReqs, 10))
			b.ReportMetric(used.apiserver.Seconds(), name+"-apiserver-cpu-s")
			b.ReportMetric(used.etcd.Seconds(), name+"-etcd-cpu-s")
			b.ReportMetric(used.self.Seconds(), name+"-process-cpu-s")
			b.ReportMetric(writes(reqs, nowReqs)/skillCount, name+"-writes/skill")
			cpu, reqs = now, nowReqs
		}
		floorCreate := floor(1)
		phase("floor-create")
		wait := profileAPIServer(b, e, "apiserver-skill-create", 15*time.Second)
		create, writesCreate := createSkills(ctx, b, e, opNS, "throughput", skillCount, 20, 1)
		phase("create")
		wait()
		if n := countConfigMaps(ctx, b, e.Client, opNS); n != skillCount {
			b.Fatalf("%d ConfigMaps serve the %d Skills", n, skillCount)
		}
		floorUpdate := floor(2)
		phase("floor-update")
		update, writesUpdate := createSkills(ctx, b, e, opNS, "throughput", skillCount, 20, 2)
		phase("update")

		b.ReportMetric(seconds(create), "create-s")
		b.ReportMetric(seconds(floorCreate), "floor-create-s")
		b.ReportMetric(create.Seconds()/floorCreate.Seconds(), "create-ratio")
		b.ReportMetric(seconds(writesCreate), "writes-create-s")
		b.ReportMetric(seconds(update), "update-s")
		b.ReportMetric(seconds(floorUpdate), "floor-update-s")
		b.ReportMetric(update.Seconds()/floorUpdate.Seconds(), "update-ratio")
		b.ReportMetric(seconds(writesUpdate), "writes-update-s")
		servedSkills = opNS
	}
}
