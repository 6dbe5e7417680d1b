// Command local runs kubeskills without a cluster: a real kube-apiserver and
// etcd (the ones the tests use), the CRDs, the operator in-process, and the
// samples of config/samples. It writes a kubeconfig and stops everything on
// Ctrl-C.
//
//	go run ./hack/local            (what `make run-local` does)
//	go run ./hack/local --smoke    (start, apply, check, stop)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

type options struct {
	stateDir string
	smoke    bool
}

func main() {
	var o options
	flag.StringVar(&o.stateDir, "state-dir", filepath.Join(testenv.RepoRoot(), "bin", "local"), "Directory for the kubeconfig and logs.")
	flag.BoolVar(&o.smoke, "smoke", false, "Start, apply the samples, list them, and stop.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return fmt.Errorf("failed to create state directory %s: %w", o.stateDir, err)
	}
	logFile, err := os.Create(filepath.Join(o.stateDir, "manager.log"))
	if err != nil {
		return fmt.Errorf("failed to create manager log: %w", err)
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	fmt.Fprintln(out, "Starting etcd and kube-apiserver ...")
	start := time.Now()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the control plane ...")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
		}
	}()
	kubeconfig, err := writeKubeconfig(env, o.stateDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Control plane up in %s, CRDs installed.\n", time.Since(start).Round(time.Millisecond))

	mgr, err := manager.New(ctx, env.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0", SkillWorkers: 4, RunWorkers: 4, Image: manager.DefaultImage, SandboxImage: manager.DefaultSandboxImage})
	if err != nil {
		return err
	}
	mgrCtx, cancelMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() { cancelMgr(); <-mgrDone }()

	kubectl := kubectlFunc(env, kubeconfig, out)
	if err := kubectl(ctx, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples")); err != nil {
		return err
	}
	if o.smoke {
		return kubectl(ctx, "get", "skills,agents,commandpolicies,commandruns")
	}
	fmt.Fprintf(out, `
kubeskills runs locally (operator log: %s).

  export KUBECONFIG=%s
  export PATH=%s:$PATH
  kubectl get skills,agents,commandpolicies,commandruns
  kubectl describe skill cluster-health

Press Ctrl-C to stop.
`, logFile.Name(), kubeconfig, filepath.Dir(env.KubectlPath()))
	select {
	case <-ctx.Done():
		return nil
	case err := <-mgrDone:
		mgrDone <- err
		return fmt.Errorf("manager stopped: %w", err)
	}
}

// writeKubeconfig writes a cluster-admin kubeconfig for the control plane.
func writeKubeconfig(env *testenv.Env, dir string) (string, error) {
	data, err := env.AdminKubeconfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return path, nil
}

// kubectlFunc runs the kubectl built beside the control plane.
func kubectlFunc(env *testenv.Env, kubeconfig string, out io.Writer) func(context.Context, ...string) error {
	return func(ctx context.Context, args ...string) error {
		cmd := exec.CommandContext(ctx, env.KubectlPath(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("failed to run kubectl %v: %w", args, err)
		}
		return nil
	}
}
