// Command agent is the kubeskills agent runtime, run in an Agent's pods: it
// serves the Agent's skills to its model and runs the model's commands as
// CommandRuns. See package internal/agent.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	kubescheme "github.com/kubeskills/kubeskills/internal/scheme"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// shutdownGrace is how long requests in flight may take to finish once
// the pod is asked to stop.
const shutdownGrace = 25 * time.Second

func main() {
	var o agent.Options
	o.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	ctx := ctrl.SetupSignalHandler()
	if err := run(ctx, o, ctrl.Log.WithName("agent")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves the runtime until ctx ends (SIGTERM), then lets requests in
// flight finish.
func run(ctx context.Context, o agent.Options, log logr.Logger) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	stopTracing, err := telemetry.Setup(ctx, "kubeskills-agent")
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to find a Kubernetes config: %w", err)
	}
	// The API server also says who may read /metrics, asked with each
	// caller's token, never the runtime's.
	cfg.KubeConfig = restCfg
	scheme, err := kubescheme.New()
	if err != nil {
		return err
	}
	kube, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create a Kubernetes client: %w", err)
	}
	if cfg.Identity == "" {
		if cfg.Identity, err = agent.WhoAmI(ctx, kube); err != nil {
			return err
		}
	}
	slot := &storeSlot{}
	rt, err := agent.New(cfg, slot, kube, log)
	if err != nil {
		return err
	}
	// Probes are served at once; /readyz says ready once the catalog is.
	go func() {
		store, err := openCatalog(ctx, o.CatalogDir, o.SkillsDir, log)
		if err != nil {
			return
		}
		slot.set(store)
		log.Info("Catalog loaded", "revision", store.Revision(), "skills", len(store.Catalog().Skills))
		store.Watch(ctx, o.CatalogPoll)
	}()
	log.Info("Starting agent runtime", "agent", cfg.Agent, "namespace", cfg.Namespace, "identity", cfg.Identity,
		"listen", o.Listen, "model", cfg.Model.Name, "auth", !cfg.DisableAuth)
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", o.Listen, err)
	}
	return rt.Serve(ctx, lis, shutdownGrace)
}

// storeSlot serves the catalog store once it is open. Before, the catalog
// is not loaded: the runtime is not ready and serves no chat.
type storeSlot struct{ store atomic.Pointer[catalog.Store] }

var _ agent.Skills = (*storeSlot)(nil)

// errNotLoaded answers for skills while the catalog is not loaded.
var errNotLoaded = fmt.Errorf("the catalog is not loaded yet: %w", catalog.ErrUnavailable)

func (s *storeSlot) set(store *catalog.Store) { s.store.Store(store) }

func (s *storeSlot) Catalog() *catalog.Catalog {
	if st := s.store.Load(); st != nil {
		return st.Catalog()
	}
	return nil
}

func (s *storeSlot) Reloads() (ok, failed int) {
	if st := s.store.Load(); st != nil {
		return st.Reloads()
	}
	return 0, 0
}

func (s *storeSlot) Prompt(budgetTokens int) (string, int, int) {
	if st := s.store.Load(); st != nil {
		return st.Prompt(budgetTokens)
	}
	return "", 0, 0
}

func (s *storeSlot) Use(name string, explicit bool) (*catalog.Loaded, error) {
	if st := s.store.Load(); st != nil {
		return st.Use(name, explicit)
	}
	return nil, errNotLoaded
}

func (s *storeSlot) ReadFile(name, path string, maxBytes int) ([]byte, error) {
	if st := s.store.Load(); st != nil {
		return st.ReadFile(name, path, maxBytes)
	}
	return nil, errNotLoaded
}

// openCatalog opens the mounted catalog, trying again every few seconds
// while it is not there yet (its ConfigMap is written, or mounted, after
// the pod started).
func openCatalog(ctx context.Context, catalogDir, skillsDir string, log logr.Logger) (*catalog.Store, error) {
	logf := func(msg string, kv ...any) { log.Info(msg, kv...) }
	for {
		store, err := catalog.Open(catalogDir, skillsDir, logf)
		if err == nil {
			return store, nil
		}
		log.Info("Waiting for the catalog", "reason", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("failed to open the catalog before shutdown: %w", err)
		case <-time.After(2 * time.Second):
		}
	}
}
