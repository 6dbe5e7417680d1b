package runner

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// settled waits until the clock the kernel stamps files with has moved
// past path's last change, so a run started now sees path as older than
// itself and lets it run.
func settled(t testing.TB, path string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	gomega.NewWithT(t).Eventually(func() bool {
		var now unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now)
		return now.Sec > st.Ctim.Sec || now.Sec == st.Ctim.Sec && now.Nsec > st.Ctim.Nsec
	}, time.Second, time.Millisecond).Should(gomega.BeTrue(), "the coarse clock did not move past %s's change", path)
}
