// Package redistest runs throwaway redis-server processes for tests: a
// single server that a test can kill and bring back on the same port, a
// replica of one, or a three-node Redis Cluster. Servers listen on loopback ephemeral ports, keep
// nothing on disk beyond a test's temporary directory, and are killed when
// the test ends.
//
// redis-server (and redis-cli for clusters) must be on PATH; `make test`
// installs them, or `apt-get install -y redis-server`.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer, and a
// cluster to report cluster_state:ok.
const startTimeout = 15 * time.Second

// Server is one redis-server process on a fixed loopback port.
type Server struct {
	// Addr is host:port, stable across Stop and Start.
	Addr string

	t        testing.TB
	port     int
	dir      string
	args     []string
	password string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  *tailBuffer
}

// Start launches a redis-server for the test and returns its address.
func Start(t testing.TB) string {
	t.Helper()
	return StartServer(t).Addr
}

// StartServer launches a redis-server on a free loopback port, waits until
// it answers and kills it when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerWith(t, Options{})
}

// Options adjusts StartServerWith.
type Options struct {
	// Password, if set, is required from clients (requirepass).
	Password string
	// Args are extra redis-server arguments, e.g. "--maxmemory", "1mb".
	Args []string
}

// StartServerWith is StartServer with options.
func StartServerWith(t testing.TB, opts Options) *Server {
	t.Helper()
	args := append([]string(nil), opts.Args...)
	if opts.Password != "" {
		args = append(args, "--requirepass", opts.Password)
	}
	return startServer(t, args, opts.Password, pickPort)
}

func startServer(t testing.TB, extra []string, password string, pick func() (int, error)) *Server {
	t.Helper()
	requireBinary(t, "redis-server")
	s := &Server{t: t, dir: t.TempDir(), args: extra, password: password}
	t.Cleanup(s.Stop)
	var lastErr error
	for try := 0; try < 10; try++ {
		port, err := pick()
		if err != nil {
			lastErr = err
			continue
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = s.launch(); lastErr == nil {
			return s
		}
		// Most likely another process took the port between our probe and
		// redis-server's bind: try another one.
	}
	t.Fatalf("redistest: could not start redis-server: %v", lastErr)
	return nil
}

// Stop kills the server (SIGKILL, like a crash) and waits for it to exit.
// It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Start launches the server again on the same port, after Stop. Its data
// is gone unless the server was started with persistence in its Args
// (by default nothing is persisted).
func (s *Server) Start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: restarting redis-server on %s: %v", s.Addr, err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing is
// answered, like a hung Redis. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: server %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signalling redis-server: %v", err)
	}
}

// launch starts redis-server on s.port and waits until it answers PING or
// exits.
func (s *Server) launch() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("already running")
	}
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "",
		"--daemonize", "no",
	}
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	out := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.out = cmd, done, out
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			s.mu.Lock()
			if s.cmd == cmd {
				s.cmd = nil
			}
			s.mu.Unlock()
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, out.String())
		default:
		}
		// Ask for the process id rather than just PING: another server
		// that grabbed the port first must not be mistaken for ours.
		if info, err := AuthCommand(s.Addr, s.password, "INFO", "server"); err == nil &&
			strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %s", s.port, startTimeout, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StartReplica starts a redis-server that replicates master (--replicaof,
// with --masterauth when master has a password) and returns once the
// replica acknowledges a write (so WAIT counts it). It is killed when the
// test ends.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatalf("redistest: master address %q: %v", master.Addr, err)
	}
	// The first sync would otherwise wait 5s for more replicas to join.
	if _, err := AuthCommand(master.Addr, master.password, "CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		t.Fatalf("redistest: configuring master %s: %v", master.Addr, err)
	}
	args := []string{"--replicaof", host, port}
	if master.password != "" {
		args = append(args, "--masterauth", master.password)
	}
	s := startServer(t, args, "", pickPort)
	// The replica is in sync once it acknowledges a write (WAIT counts
	// it): its link being up is not enough, the first acknowledgement can
	// take another second.
	deadline := time.Now().Add(startTimeout)
	for {
		acked, err := authCommands(master.Addr, master.password,
			[]string{"SET", "redistest:replica-sync", "1"},
			[]string{"DEL", "redistest:replica-sync"},
			[]string{"WAIT", "1", "100"})
		if err == nil && acked == "1" {
			return s
		}
		if time.Now().After(deadline) {
			info, _ := Command(s.Addr, "INFO", "replication")
			t.Fatalf("redistest: replica %s of %s not in sync within %v: %v %s", s.Addr, master.Addr, startTimeout, err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StartCluster starts a three-node Redis Cluster (no replicas) and returns
// the nodes' addresses once every node reports cluster_state:ok. The nodes
// are killed when the test ends.
func StartCluster(t testing.TB) []string {
	t.Helper()
	requireBinary(t, "redis-server")
	requireBinary(t, "redis-cli")
	var addrs []string
	for i := 0; i < 3; i++ {
		// The config file is relative to the server's own --dir.
		s := startServer(t, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		}, "", pickClusterPort)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.Command("redis-cli", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(startTimeout)
	for _, addr := range addrs {
		for {
			info, err := Command(addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:3") &&
				strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ready within %v: %v %s", addr, startTimeout, err, info)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return addrs
}

func requireBinary(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("redistest: %s is not on PATH; run `make test` (which installs it) or `apt-get install -y redis-server`", name)
	}
}

// pickPort returns a loopback port that was free a moment ago.
func pickPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// pickClusterPort returns a port p such that p and its cluster bus port
// p+10000 were both free a moment ago.
func pickClusterPort() (int, error) {
	for try := 0; try < 50; try++ {
		p := 15000 + rand.IntN(40000)
		if portFree(p) && portFree(p+10000) {
			return p, nil
		}
	}
	return 0, errors.New("no free port pair for a cluster node")
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// Command sends one command to the Redis at addr over a fresh connection
// and returns its reply as text: a status or bulk string as is, an integer
// in decimal, a nil as "". An error reply is returned as an error. Arrays
// are not supported. It is meant for test set-up, not speed.
func Command(addr string, args ...string) (string, error) {
	return AuthCommand(addr, "", args...)
}

// Calls is how many times the Redis at addr has run the command name
// (lower case, as INFO commandstats names it: "wait", "evalsha"); 0 when
// it never has. A failure fails t.
func Calls(t testing.TB, addr, name string) int {
	t.Helper()
	stats, err := Command(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("redistest: INFO commandstats on %s: %v", addr, err)
	}
	for line := range strings.Lines(stats) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("redistest: commandstats %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// AuthCommand is Command on a server that requires password (none when
// password is empty).
func AuthCommand(addr, password string, args ...string) (string, error) {
	return authCommands(addr, password, args)
}

// authCommands sends cmds in order on one connection (so a WAIT covers
// the writes before it) and returns the last reply.
func authCommands(addr, password string, cmds ...[]string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	rd := bufio.NewReader(conn)
	if password != "" {
		cmds = append([][]string{{"AUTH", password}}, cmds...)
	}
	var last string
	for _, args := range cmds {
		if last, err = roundTrip(conn, rd, args...); err != nil {
			return "", err
		}
	}
	return last, nil
}

func roundTrip(conn net.Conn, rd *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	return readReply(rd)
}

// readReply reads one reply; an array's elements are joined with spaces.
func readReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad array length %q", line)
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(rd)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unsupported reply %q", line)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Sentinel is one redis-server running as a Sentinel.
type Sentinel struct {
	// Addr is the sentinel's host:port.
	Addr string
	// MasterName is the name it monitors the master under.
	MasterName string
}

// StartSentinel starts a Sentinel monitoring master under the name
// "mymaster" with a quorum of 1 and a one-second down-after, and returns
// once it knows the master and its replicas. It is killed when the test
// ends.
func StartSentinel(t testing.TB, master *Server) *Sentinel {
	t.Helper()
	requireBinary(t, "redis-server")
	host, mport, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatalf("redistest: master address %q: %v", master.Addr, err)
	}
	dir := t.TempDir()
	var lastErr error
	for try := 0; try < 10; try++ {
		port, err := pickPort()
		if err != nil {
			lastErr = err
			continue
		}
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n"+
			"sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n", port, dir, host, mport)
		path := dir + "/sentinel-" + strconv.Itoa(port) + ".conf"
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		cmd := exec.Command("redis-server", path, "--sentinel")
		out := &tailBuffer{max: 8 << 10}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: starting redis-server --sentinel: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		deadline := time.Now().Add(startTimeout)
		for {
			select {
			case <-done:
				lastErr = fmt.Errorf("sentinel exited: %s", out.String())
			default:
				if reply, err := Command(addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"); err == nil && strings.Contains(reply, mport) {
					return &Sentinel{Addr: addr, MasterName: "mymaster"}
				}
				if time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				lastErr = fmt.Errorf("sentinel on %s did not report the master within %v: %s", addr, startTimeout, out.String())
			}
			break
		}
	}
	t.Fatalf("redistest: could not start a sentinel: %v", lastErr)
	return nil
}

// Failover asks the sentinel to promote a replica now, and returns once it
// reports a master other than old.
func (s *Sentinel) Failover(t testing.TB, old string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	// Until the sentinel has seen the replica (it asks the master with
	// INFO), it has no replica to promote.
	for {
		_, err := Command(s.Addr, "SENTINEL", "FAILOVER", s.MasterName)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "NOGOODSLAVE") || time.Now().After(deadline) {
			t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, oldPort, _ := net.SplitHostPort(old)
	for {
		reply, err := Command(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
		if err == nil && !strings.Contains(reply, oldPort) {
			return reply
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: no failover within 30s: %v %q", err, reply)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
