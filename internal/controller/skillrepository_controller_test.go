package controller_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// tarEntry is one entry of a test artifact: a file, or a link when link is
// set.
type tarEntry struct {
	name, body, link string
	mode             int64
}

// artifactServer serves artifacts as Flux's source-controller does: a
// gzipped tarball at a URL, named by the source's status.artifact with its
// digest. It stands in for source-controller's storage only.
type artifactServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newArtifactServer(t *testing.T) *artifactServer {
	s := &artifactServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// publish serves a tarball of the entries and returns its URL and digest.
func (s *artifactServer) publish(t *testing.T, revision string, entries []tarEntry) (url, digest string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if e.mode != 0 {
			h.Mode = e.mode
		}
		if e.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := "/gitrepository/" + strings.ReplaceAll(revision, "/", "-") + ".tar.gz"
	s.mu.Lock()
	s.files[path] = buf.Bytes()
	s.mu.Unlock()
	return s.URL + path, fmt.Sprintf("sha256:%x", sha256.Sum256(buf.Bytes()))
}

// repoFolder is the skill folders of examples/skill-repo as entries under
// skills/, with their modes.
func repoFolder(t *testing.T) []tarEntry {
	t.Helper()
	root := filepath.Join(testenv.RepoRoot(), "examples", "skill-repo")
	var entries []tarEntry
	err := filepath.WalkDir(filepath.Join(root, "skills"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		entries = append(entries, tarEntry{name: filepath.ToSlash(rel), body: string(body), mode: int64(info.Mode().Perm())})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// replaced returns entries with the entry of name replaced by e (removed
// when e is nil), or e added.
func replaced(entries []tarEntry, name string, e *tarEntry) []tarEntry {
	var out []tarEntry
	found := false
	for _, x := range entries {
		if x.name == name || strings.HasPrefix(x.name, name+"/") {
			found = true
			if e != nil && x.name == name {
				out = append(out, *e)
			}
			continue
		}
		out = append(out, x)
	}
	if !found && e != nil {
		out = append(out, *e)
	}
	return out
}

// gitRepository makes a Flux GitRepository; setArtifact then writes its
// status as source-controller would.
func gitRepository(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	src := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"url": "https://git.example.com/skills.git", "interval": "1m"},
	}}
	src.SetGroupVersionKind(controller.FluxSourceGVK(skillsv1.SourceGitRepository))
	src.SetNamespace(ns)
	src.SetName(name)
	if err := k8s.Create(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	return src
}

func setArtifact(t *testing.T, src *unstructured.Unstructured, url, digest, revision string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(src), src)).To(Succeed())
		g.Expect(unstructured.SetNestedMap(src.Object, map[string]any{
			"url": url, "digest": digest, "revision": revision,
			"path": "gitrepository/skills.tar.gz", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
		}, "status", "artifact")).To(Succeed())
		g.Expect(k8s.Status().Update(context.Background(), src)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// skillRepository makes a SkillRepository of the source under path.
func skillRepository(t *testing.T, ns, name, source, path string) *skillsv1.SkillRepository {
	t.Helper()
	repo := &skillsv1.SkillRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.SkillRepositorySpec{
			SourceRef: skillsv1.SourceRef{Kind: skillsv1.SourceGitRepository, Name: source}, Path: path,
		},
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	return repo
}

// waitRepo waits until check holds of the repository, its generation
// observed.
func waitRepo(t *testing.T, repo *skillsv1.SkillRepository, check func(g Gomega, r *skillsv1.SkillRepository)) *skillsv1.SkillRepository {
	t.Helper()
	got := &skillsv1.SkillRepository{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		check(g, got)
	}, timeout, interval).Should(Succeed())
	return got
}

// readyWith checks the repository's Ready condition.
func readyWith(status metav1.ConditionStatus, reason, message string) func(g Gomega, r *skillsv1.SkillRepository) {
	return func(g Gomega, r *skillsv1.SkillRepository) {
		ready := condition(r.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status), ready.Message)
		g.Expect(ready.Reason).To(Equal(reason), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring(message))
	}
}

// servesFolders checks that every folder of examples/skill-repo is a Skill
// of the repository, with its files byte for byte.
func servesFolders(g Gomega, repo *skillsv1.SkillRepository, entries []tarEntry) {
	want := map[string]map[string]string{}
	for _, e := range entries {
		parts := strings.SplitN(strings.TrimPrefix(e.name, "skills/"), "/", 2)
		if want[parts[0]] == nil {
			want[parts[0]] = map[string]string{}
		}
		want[parts[0]][parts[1]] = e.body
	}
	var list skillsv1.SkillList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(repo.Namespace),
		client.MatchingLabels{skillsv1.LabelSkillRepository: repo.Name})).To(Succeed())
	got := map[string]map[string]string{}
	for i := range list.Items {
		obj := &list.Items[i]
		g.Expect(metav1.IsControlledBy(obj, repo)).To(BeTrue(), "Skill %s owners %v", obj.Name, obj.OwnerReferences)
		s, problems := skillapi.FromObject(obj)
		g.Expect(problems).To(BeEmpty())
		files := map[string]string{skill.SkillFileName: string(skill.Render(s))}
		for _, f := range s.Files {
			files[f.Path] = string(f.Content)
		}
		got[obj.Name] = files
	}
	g.Expect(got).To(HaveLen(len(want)))
	for name, files := range want {
		g.Expect(got).To(HaveKey(name))
		for p, body := range files {
			if p == skill.SkillFileName {
				continue // rendered again from the spec
			}
			g.Expect(got[name]).To(HaveKeyWithValue(p, body), "file %s of skill %s", p, name)
		}
	}
}

// TestSkillRepositoryFollowsItsSource follows a repository of plain skill
// folders through the revisions of its Flux source: every folder becomes a
// Skill it owns, an edit reaches its Skill, a broken folder keeps its last
// version served and says why, a fix serves again, a folder removed is
// pruned; and an artifact that cannot be had or trusted (unreachable, a
// digest that does not match, a path out of it, a link, too large) changes
// no Skill and says why.
func TestSkillRepositoryFollowsItsSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	server := newArtifactServer(t)
	src := gitRepository(t, ns, "skills")
	entries := repoFolder(t)
	url, digest := server.publish(t, "main@sha1:1", entries)
	setArtifact(t, src, url, digest, "main@sha1:1")
	repo := skillRepository(t, ns, "team-skills", "skills", "skills")

	got := waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 3 Skills of revision main@sha1:1"))
	g.Expect(got.Status.Skills).To(Equal([]string{"dns-debug", "incident-summary", "rollout-check"}))
	g.Expect(got.Status.Digest).To(Equal(digest))
	g.Eventually(func(g Gomega) { servesFolders(g, got, entries) }, timeout, interval).Should(Succeed())
	waitSkillState(t, ns, "rollout-check", metav1.ConditionTrue, skillsv1.ReconciledReason)

	// revision publishes entries as the source's next revision.
	rev := 1
	revision := func(entries []tarEntry) string {
		rev++
		r := fmt.Sprintf("main@sha1:%d", rev)
		url, digest := server.publish(t, r, entries)
		setArtifact(t, src, url, digest, r)
		return r
	}
	skillMD := func(entries []tarEntry, name string) string {
		for _, e := range entries {
			if e.name == "skills/"+name+"/SKILL.md" {
				return e.body
			}
		}
		t.Fatalf("no SKILL.md for %s", name)
		return ""
	}

	t.Run("edit", func(t *testing.T) {
		g := NewWithT(t)
		// Every status the repository goes through, from here on.
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		g.Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &skillsv1.SkillRepositoryList{}, client.InNamespace(ns),
			client.MatchingFields{"metadata.name": repo.Name})
		g.Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		md := skillMD(entries, "dns-debug") + "\nAlso check the node's resolv.conf.\n"
		entries = replaced(entries, "skills/dns-debug/SKILL.md", &tarEntry{name: "skills/dns-debug/SKILL.md", body: md})
		r := revision(entries)
		waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, r))
		g.Eventually(func(g Gomega) {
			g.Expect(getSkill(g, ns, "dns-debug").Spec.Instructions).To(ContainSubstring("resolv.conf"))
		}, timeout, interval).Should(Succeed())

		// Before the new revision was applied, the repository said it was
		// in progress: a kstatus reader never takes the revision before
		// for this one.
		var seen []string
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*skillsv1.SkillRepository)
			if !ok {
				continue
			}
			if c := condition(got.Status.Conditions, skillsv1.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
				seen = append(seen, c.Reason+" "+got.Status.LastAttemptedRevision+" serving "+got.Status.Revision)
			}
			if got.Status.Revision == r {
				break
			}
		}
		g.Expect(seen).To(Equal([]string{skillsv1.ProgressingReason + " " + r + " serving main@sha1:1"}))
	})

	t.Run("hand edit undone", func(t *testing.T) {
		g := NewWithT(t)
		s := getSkill(g, ns, "incident-summary")
		want := s.Spec.Description
		g.Expect(k8s.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"description":"Edited by hand."}}`)))).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getSkill(g, ns, "incident-summary").Spec.Description).To(Equal(want))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("broken folder keeps its last version", func(t *testing.T) {
		g := NewWithT(t)
		before := getSkill(g, ns, "dns-debug")
		broken := replaced(entries, "skills/dns-debug/SKILL.md", &tarEntry{name: "skills/dns-debug/SKILL.md", body: "# No front matter\n"})
		r := revision(broken)
		got := waitRepo(t, repo, readyWith(metav1.ConditionFalse, skillsv1.SkillsFailedReason, "1 skill folder of revision "+r+" is not served as committed"))
		g.Expect(condition(got.Status.Conditions, skillsv1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.Problems).To(HaveLen(1))
		g.Expect(got.Status.Problems[0].Path).To(Equal("dns-debug"))
		g.Expect(got.Status.Problems[0].Message).To(HavePrefix("folder dns-debug: failed to parse dns-debug/SKILL.md"))
		g.Expect(got.Status.Problems[0].Message).To(ContainSubstring("the last good version is still served"))
		g.Expect(got.Status.Skills).To(ContainElement("dns-debug"))
		s := waitSkillState(t, ns, "dns-debug", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
		g.Expect(s.Annotations[skillsv1.AnnotationSourceError]).To(ContainSubstring("folder dns-debug"))
		g.Expect(s.Spec).To(Equal(before.Spec), "the last spec stays")
		g.Expect(s.Status.ServedGeneration).To(Equal(before.Status.ServedGeneration))

		revision(entries)
		waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 3 Skills"))
		s = waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)
		g.Expect(s.Annotations).NotTo(HaveKey(skillsv1.AnnotationSourceError))
	})

	t.Run("folder removed is pruned", func(t *testing.T) {
		g := NewWithT(t)
		entries = replaced(entries, "skills/rollout-check", nil)
		revision(entries)
		got := waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 2 Skills"))
		g.Expect(got.Status.Skills).To(Equal([]string{"dns-debug", "incident-summary"}))
		g.Eventually(func(g Gomega) {
			err := k8s.Get(ctx, keyOf(ns, "rollout-check"), &skillsv1.Skill{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred())
		}, timeout, interval).Should(Succeed())
	})

	// Each bad artifact leaves the Skills of the last good revision as
	// they are, and says why.
	served := func(g Gomega) map[string]int64 {
		var list skillsv1.SkillList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		gens := map[string]int64{}
		for _, s := range list.Items {
			gens[s.Name] = s.Generation
		}
		return gens
	}
	good := served(g)
	lastGood := waitRepo(t, repo, func(Gomega, *skillsv1.SkillRepository) {}).Status.Revision
	for _, tc := range []struct {
		name    string
		publish func() (url, digest string)
		message string
	}{{
		name: "digest mismatch",
		publish: func() (string, string) {
			url, _ := server.publish(t, "mismatch", entries)
			return url, fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("another artifact")))
		},
		message: "computed digest doesn't match",
	}, {
		name: "unreachable",
		publish: func() (string, string) {
			// Content not read before: an artifact whose digest was read
			// already is not fetched again.
			_, digest := server.publish(t, "moved", append(entries, tarEntry{name: "skills/NOTES.md", body: "moved\n"}))
			return server.URL + "/gitrepository/gone.tar.gz", digest
		},
		message: "serves no artifact",
	}, {
		name: "path out of the artifact",
		publish: func() (string, string) {
			return server.publish(t, "traversal", append(entries, tarEntry{name: "../../etc/cron.d/evil", body: "* * * * * root true\n"}))
		},
		message: "failed to unpack the artifact",
	}, {
		name: "link",
		publish: func() (string, string) {
			return server.publish(t, "link", append(entries, tarEntry{name: "skills/dns-debug/references/passwd", link: "/etc/passwd"}))
		},
		message: "symlink, which is not allowed",
	}, {
		name: "too large",
		publish: func() (string, string) {
			// 101 MiB of zeros: a small download that unpacks past the bound.
			big := strings.Repeat("\x00", 101<<20)
			return server.publish(t, "large", append(entries, tarEntry{name: "skills/dns-debug/references/big.bin", body: big}))
		},
		message: "at most 104857600 bytes are unpacked",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			url, digest := tc.publish()
			rev++
			r := fmt.Sprintf("main@sha1:%d", rev)
			setArtifact(t, src, url, digest, r)
			got := waitRepo(t, repo, func(g Gomega, got *skillsv1.SkillRepository) {
				g.Expect(got.Status.LastAttemptedRevision).To(Equal(r))
				readyWith(metav1.ConditionFalse, skillsv1.ArtifactFailedReason, tc.message)(g, got)
			})
			g.Expect(condition(got.Status.Conditions, skillsv1.ReconcilingCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.Revision).To(Equal(lastGood))
			g.Expect(served(g)).To(Equal(good))
		})
	}
}

// TestSkillRepositoriesNeverOverwriteASkill: a folder whose name is a Skill
// that another repository (or anything else) made is refused, with the
// maker named, and that Skill is left as it is.
func TestSkillRepositoriesNeverOverwriteASkill(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	server := newArtifactServer(t)
	entries := repoFolder(t)
	first, second := gitRepository(t, ns, "first"), gitRepository(t, ns, "second")
	url, digest := server.publish(t, "first", entries)
	setArtifact(t, first, url, digest, "main@sha1:a")
	repoA := skillRepository(t, ns, "a", "first", "skills")
	waitRepo(t, repoA, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 3 Skills"))
	before := getSkill(g, ns, "dns-debug")

	other := replaced(entries, "skills/dns-debug/SKILL.md", &tarEntry{name: "skills/dns-debug/SKILL.md",
		body: "---\nname: dns-debug\ndescription: Another team's DNS skill.\n---\n\nSomething else.\n"})
	url, digest = server.publish(t, "second", other)
	setArtifact(t, second, url, digest, "main@sha1:b")
	repoB := skillRepository(t, ns, "b", "second", "skills")
	got := waitRepo(t, repoB, readyWith(metav1.ConditionFalse, skillsv1.SkillsFailedReason, "Skill dns-debug exists, made by SkillRepository a"))
	g.Expect(got.Status.Problems).To(HaveLen(3), "every folder of b is a Skill of a")
	g.Expect(got.Status.Skills).To(BeEmpty())
	g.Consistently(func(g Gomega) {
		s := getSkill(g, ns, "dns-debug")
		g.Expect(s.Spec).To(Equal(before.Spec))
		g.Expect(metav1.IsControlledBy(s, repoA)).To(BeTrue())
	}, time.Second, interval).Should(Succeed())
}

// TestSkillRepositoryWaitsForItsSource: a repository whose source is
// missing, or has no artifact yet, is not Ready and says which.
func TestSkillRepositoryWaitsForItsSource(t *testing.T) {
	ns := namespace(t)
	repo := skillRepository(t, ns, "early", "skills", "")
	waitRepo(t, repo, readyWith(metav1.ConditionFalse, skillsv1.SourceNotReadyReason, "GitRepository skills not found"))
	gitRepository(t, ns, "skills")
	waitRepo(t, repo, readyWith(metav1.ConditionFalse, skillsv1.SourceNotReadyReason, "GitRepository skills has no artifact yet"))
}

// TestSkillRepositoryWhoseRootIsASkill: a repository that is one skill
// folder, read from its root (no spec.path), makes a Skill named by its
// SKILL.md, as the root has no folder name in the artifact; a commit that
// breaks it keeps the last good version, and a fix serves again.
func TestSkillRepositoryWhoseRootIsASkill(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	server := newArtifactServer(t)
	src := gitRepository(t, ns, "one-skill")
	good := []tarEntry{
		{name: "SKILL.md", body: "---\nname: pager-triage\ndescription: Triage a page. Use it when paged.\n---\n\nRead the alert, then the runbook.\n"},
		{name: "scripts/ack.sh", body: "#!/bin/sh\necho ack\n", mode: 0o755},
	}
	url, digest := server.publish(t, "main@sha1:1", good)
	setArtifact(t, src, url, digest, "main@sha1:1")
	repo := skillRepository(t, ns, "one-skill", "one-skill", "")

	got := waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 1 Skills of revision main@sha1:1"))
	g.Expect(got.Status.Skills).To(Equal([]string{"pager-triage"}))
	before := waitSkillState(t, ns, "pager-triage", metav1.ConditionTrue, skillsv1.ReconciledReason)

	url, digest = server.publish(t, "main@sha1:2", replaced(good, "SKILL.md", &tarEntry{name: "SKILL.md", body: "# No front matter\n"}))
	setArtifact(t, src, url, digest, "main@sha1:2")
	got = waitRepo(t, repo, readyWith(metav1.ConditionFalse, skillsv1.SkillsFailedReason, "revision main@sha1:2"))
	g.Expect(got.Status.Problems).To(HaveLen(1))
	g.Expect(got.Status.Problems[0].Path).To(Equal("."))
	g.Expect(got.Status.Problems[0].Skill).To(Equal("pager-triage"))
	g.Expect(got.Status.Problems[0].Message).To(ContainSubstring("the last good version is still served"))
	g.Expect(got.Status.Skills).To(Equal([]string{"pager-triage"}))
	s := waitSkillState(t, ns, "pager-triage", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
	g.Expect(s.Spec).To(Equal(before.Spec), "the last spec stays")

	url, digest = server.publish(t, "main@sha1:3", good)
	setArtifact(t, src, url, digest, "main@sha1:3")
	waitRepo(t, repo, readyWith(metav1.ConditionTrue, skillsv1.ReconciledReason, "Applied 1 Skills of revision main@sha1:3"))
	waitSkillState(t, ns, "pager-triage", metav1.ConditionTrue, skillsv1.ReconciledReason)
}
