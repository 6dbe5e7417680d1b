// Command manager is the kubeskills operator: it validates Skills into
// ConfigMaps, runs Agents, and judges and runs CommandRuns.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/manager"
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
	mgr, err := manager.New(ctx, ctrl.GetConfigOrDie(), o)
	if err == nil {
		setup.Info("Starting manager")
		err = mgr.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
