// Command manager is the kubeskills operator: it validates Skills into
// ConfigMaps, runs Agents, and judges and runs CommandRuns.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

func main() {
	var o manager.Options
	o.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	setup := ctrl.Log.WithName("setup")
	if limit := manager.SetMemoryLimit(o.MemoryLimit); limit != math.MaxInt64 {
		setup.Info("Go memory limit", "bytes", limit, "containerLimit", o.MemoryLimit)
	}

	ctx := ctrl.SetupSignalHandler()
	stopTracing, err := telemetry.Setup(ctx, "kubeskills-manager")
	if err == nil {
		defer func() { _ = stopTracing(context.Background()) }()
		var mgr ctrl.Manager
		if mgr, err = manager.New(ctx, ctrl.GetConfigOrDie(), o); err == nil {
			setup.Info("Starting manager", "tracing", telemetry.Enabled())
			err = mgr.Start(ctx)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
