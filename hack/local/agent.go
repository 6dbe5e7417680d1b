package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/kubeletfs"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// localAgent is the sample Agent's runtime, run as a local process.
type localAgent struct {
	url   string
	token string
	log   string
}

// runAgent runs bin/agent for the Agent ns/name against the local control
// plane, as the agent's own ServiceAccount, with its catalog and skills
// mirrored to disk the way the kubelet mounts them (there is no kubelet
// here). It returns once the runtime is ready; ctx stops it.
func runAgent(ctx context.Context, env *testenv.Env, o options, ns, name string) (*localAgent, error) {
	a, err := waitForCatalog(ctx, env.Client, ns, name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.stateDir, "agent")
	identity := "system:serviceaccount:" + ns + ":agent-" + name
	kubeconfig, err := env.UserKubeconfig(identity, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	if err != nil {
		return nil, err
	}
	token, err := readToken(ctx, env.Client, ns, a.Status.TokenSecretName)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"kubeconfig": kubeconfig, "token": token}
	for f, data := range files {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", dir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return nil, fmt.Errorf("failed to write %s: %w", f, err)
		}
	}
	m := &mirror{c: env.Client, ns: ns, agent: name, root: filepath.Join(dir, "mounts"), seen: map[string]string{}}
	if err := m.sync(ctx); err != nil {
		return nil, err
	}
	go m.run(ctx)

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	model := a.Spec.Model
	if o.modelURL != "" {
		model.BaseURL = o.modelURL
	}
	if o.modelName != "" {
		model.Name = o.modelName
	}
	logPath := filepath.Join(o.stateDir, "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("failed to create agent log: %w", err)
	}
	cmd := exec.CommandContext(ctx, o.agentBinary,
		"--kubeconfig="+filepath.Join(dir, "kubeconfig"),
		"--agent="+name, "--namespace="+ns, "--identity="+identity,
		"--listen=127.0.0.1:"+strconv.Itoa(port),
		"--catalog-dir="+filepath.Join(m.root, "catalog"), "--skills-dir="+filepath.Join(m.root, "skills"),
		"--model-base-url="+model.BaseURL, "--model-name="+model.Name,
		"--token-file="+filepath.Join(dir, "token"),
		"--catalog-poll=500ms")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s (run 'make build'): %w", o.agentBinary, err)
	}
	go func() { _ = cmd.Wait(); logFile.Close() }()
	la := &localAgent{url: "http://127.0.0.1:" + strconv.Itoa(port), token: string(token), log: logPath}
	return la, waitReady(ctx, la.url+"/readyz")
}

// waitForCatalog waits until the operator has written the Agent's catalog
// and token.
func waitForCatalog(ctx context.Context, c client.Client, ns, name string) (*skillsv1.Agent, error) {
	a := &skillsv1.Agent{}
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return a.Status.CatalogRevision != "" && a.Status.TokenSecretName != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("the operator wrote no catalog for agent %s/%s: %w", ns, name, err)
	}
	return a, nil
}

func readToken(ctx context.Context, c client.Client, ns, name string) ([]byte, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &secret); err != nil {
		return nil, fmt.Errorf("failed to read the agent's token Secret %s/%s: %w", ns, name, err)
	}
	return secret.Data["token"], nil
}

// mirror writes the agent's catalog and skill ConfigMaps to disk as the
// kubelet mounts them, and keeps them current.
type mirror struct {
	c     client.Client
	ns    string
	agent string
	root  string
	seen  map[string]string // directory -> resourceVersion written
}

func (m *mirror) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := m.sync(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "mirror:", err)
			}
		}
	}
}

// sync writes every ConfigMap the agent's pod would mount that changed.
func (m *mirror) sync(ctx context.Context) error {
	a := &skillsv1.Agent{}
	if err := m.c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: m.agent}, a); err != nil {
		return err
	}
	mounts := map[string]string{}
	for i := range catalog.MaxShards {
		name := "agent-" + m.agent + "-catalog"
		if i > 0 {
			name += "-" + strconv.Itoa(i)
		}
		mounts[filepath.Join(m.root, "catalog", strconv.Itoa(i))] = name
	}
	for _, s := range a.Status.Skills {
		sk := &skillsv1.Skill{}
		if err := m.c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: s.Name}, sk); err != nil {
			return err
		}
		for i, cm := range sk.Status.ConfigMaps {
			mounts[filepath.Join(m.root, "skills", s.Name, strconv.Itoa(i))] = cm
		}
	}
	for dir, name := range mounts {
		var cm corev1.ConfigMap
		err := m.c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, &cm)
		if apierrors.IsNotFound(err) || (err == nil && m.seen[dir] == cm.ResourceVersion) {
			continue
		}
		if err != nil {
			return err
		}
		if err := kubeletfs.Write(dir, kubeletfs.Keys(cm.Data, cm.BinaryData)); err != nil {
			return fmt.Errorf("failed to write %s: %w", dir, err)
		}
		m.seen[dir] = cm.ResourceVersion
	}
	return nil
}

// waitReady waits until url answers 200.
func waitReady(ctx context.Context, url string) error {
	return poll(ctx, 30*time.Second, func() (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// poll calls done until it reports true, fails, or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("failed to find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
