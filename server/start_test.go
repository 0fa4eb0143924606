package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/store/redistest"
)

// Start failing at its last step (the admin port is taken) closes all it
// opened, last opened first: the delivery listener (its port is free
// again), the queue's workers and the store's Redis connections.
func TestStartFailingLateClosesWhatItOpened(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()
	rdb := redistest.Start(t)
	y := fmt.Sprintf(`listen: %q
admin: { listen: %q }
store: { backend: redis, redis: { addrs: [%q] } }
queue: { backend: redis }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9
    delivery: queue
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`, listen, taken.Addr().String(), rdb)
	cfg, err := config.Parse([]byte(y), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(cfg, opts()); err == nil || !strings.HasPrefix(err.Error(), "admin.listen: ") {
		t.Fatalf("Start with the admin port taken: %v", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("the delivery port is still held: %v", err)
	}
	ln.Close()
	// Only the CLIENT LIST's own connection is left.
	var list string
	n := 0
	eventually.Within(t, 10*time.Second, func() bool {
		var err error
		if list, err = redistest.Command(rdb, "CLIENT", "LIST"); err != nil {
			t.Fatal(err)
		}
		n = strings.Count(strings.TrimSpace(list), "\n") + 1
		return n == 1
	}, func() string { return fmt.Sprintf("%d Redis connections left open:\n%s", n-1, list) })
}
