// Command freeport prints N distinct free TCP ports on 127.0.0.1, one per
// line, for the benchmark's processes that need a port in their config
// (nginx, redis-server, clawgate). The kernel picks them; they are free when
// printed, and the harness binds them right after.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	n := flag.Int("n", 1, "how many ports")
	flag.Parse()
	var lns []net.Listener
	for i := 0; i < *n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "freeport:", err)
			os.Exit(1)
		}
		lns = append(lns, ln) // held open until all are picked, so all differ
	}
	for _, ln := range lns {
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
}
