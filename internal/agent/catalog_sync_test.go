package agent_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/catalog"
)

// reloadMidRead serves a store, and can make a reload land between two
// reads of it, as the kubelet's update of the mounted catalog may: once
// armed, the next read of the revision reloads the store first, so a
// reader that read the catalog before sees the old entries and the new
// revision.
type reloadMidRead struct {
	*catalog.Store
	mu    sync.Mutex
	armed bool
}

func (s *reloadMidRead) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

// Revision is what the runtime read apart from the catalog before: the
// interface it serves no longer asks for it.
func (s *reloadMidRead) Revision() string {
	s.settle()
	return s.Store.Revision()
}

// settle makes the armed reload happen now if no read made it happen.
func (s *reloadMidRead) settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed {
		s.armed = false
		if err := s.Reload(); err != nil {
			panic(err)
		}
	}
}

// TestSkillListsFollowAReloadThatLandsMidRead: the catalog is reloaded
// while the runtime reads it. Whatever the order of reads, GET /v1/skills
// answers the revision of the entries it lists, and skills/list over MCP
// serves the new catalog once the reload is done, not the old one until
// the catalog next changes.
func TestSkillListsFollowAReloadThatLandsMidRead(t *testing.T) {
	g := NewWithT(t)
	all := testSkills()
	base := t.TempDir()
	writeMount(t, base, "You are the ops agent.", all[0])
	store, err := catalog.Open(filepath.Join(base, "catalog"), filepath.Join(base, "skills"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	skills := &reloadMidRead{Store: store}
	f := newFixture(t, options{skills: skills})
	oldRev := store.Revision()

	type listing struct {
		Revision string `json:"revision"`
		Skills   []struct {
			Name string `json:"name"`
		} `json:"skills"`
	}
	get := func() listing {
		code, body := f.do(t, http.MethodGet, "/v1/skills", f.token, nil)
		g.Expect(code).To(Equal(http.StatusOK))
		var l listing
		g.Expect(json.Unmarshal(body, &l)).To(Succeed())
		return l
	}

	writeMount(t, base, "You are the ops agent.", all[0], all[1])
	skills.arm()
	l := get()
	skills.settle()
	newRev := store.Revision()
	g.Expect(newRev).NotTo(Equal(oldRev))
	if len(l.Skills) == 1 {
		g.Expect(l.Revision).To(Equal(oldRev), "the revision is that of the one skill listed")
	} else {
		g.Expect(l.Revision).To(Equal(newRev), "the revision is that of the two skills listed")
	}
	g.Expect(get().Revision).To(Equal(newRev))

	cs := f.mcpSession(t, legacyProtocol, nil)
	g.Expect(listSkills(t, cs).Skills).To(HaveLen(2))
	writeMount(t, base, "You are the ops agent.", all[0])
	skills.arm()
	listSkills(t, cs)
	skills.settle()
	g.Expect(listSkills(t, cs).Skills).To(HaveLen(1), "skills/list serves the catalog reloaded, not the one read before the reload")
}
