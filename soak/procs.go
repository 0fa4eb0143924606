package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawgate/clawgate/store/redistest"
)

// child is one process the soak started. Every child gets SIGKILL when the
// soak itself dies (see setChildAttrs), and stop/kill are safe to repeat.
type child struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *os.File
}

func (c *child) launch(name string, args []string, logPath string) (*exec.Cmd, chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil, nil, errors.New("already running")
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	c.cmd, c.done, c.log = cmd, done, f
	return cmd, done, nil
}

// signalAndWait sends sig, waits up to wait for the exit, then SIGKILLs.
// It returns the time the process was seen gone (zero if nothing ran).
func (c *child) signalAndWait(sig syscall.Signal, wait time.Duration) time.Time {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return time.Time{}
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	return time.Now()
}

// forget drops a process that exited by itself.
func (c *child) forget(cmd *exec.Cmd) {
	c.mu.Lock()
	if c.cmd == cmd {
		c.cmd = nil
	}
	c.mu.Unlock()
}

func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// ---------------------------------------------------------------- redis

// redisProc is a redis-server with an append-only file fsynced on every
// write: a restart on the same port and dir loses no acknowledged write.
type redisProc struct {
	child
	addr    string
	dir     string
	logPath string
}

func startRedis(ctx context.Context, dir string) (*redisProc, error) {
	r := &redisProc{dir: dir, logPath: dir + "/redis.log"}
	var last error
	for try := 0; try < 5; try++ {
		port, err := pickPort()
		if err != nil {
			return nil, err
		}
		r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = r.start(ctx); last == nil {
			info, err := redistest.Command(r.addr, "INFO", "persistence")
			if err != nil || !strings.Contains(info, "aof_enabled:1") {
				r.stop(syscall.SIGKILL)
				return nil, fmt.Errorf("redis-server on %s: append-only file is not on (%v): %q", r.addr, err, info)
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("could not start redis-server: %w", last)
}

func (r *redisProc) start(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(r.addr)
	args := []string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--daemonize", "no",
		"--logfile", "",
		"--protected-mode", "no",
	}
	cmd, done, err := r.launch("redis-server", args, r.logPath)
	if err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			r.forget(cmd)
			return fmt.Errorf("redis-server on %s exited: %s", r.addr, tail(r.logPath, 2000))
		case <-ctx.Done():
			r.stop(syscall.SIGKILL)
			return ctx.Err()
		default:
		}
		// Our process (not another that took the port), done loading the AOF.
		if info, err := redistest.Command(r.addr, "INFO", "server"); err == nil && strings.Contains(info, want) {
			if _, err := redistest.Command(r.addr, "PING"); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			r.stop(syscall.SIGKILL)
			return fmt.Errorf("redis-server on %s did not answer within 15s: %s", r.addr, tail(r.logPath, 2000))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *redisProc) stop(sig syscall.Signal) time.Time { return r.signalAndWait(sig, 10*time.Second) }

// ---------------------------------------------------------------- gateway

// gatewayProc is one `clawgate serve` instance; it keeps its ports across
// restarts, like a process a supervisor brings back.
type gatewayProc struct {
	child
	idx     int
	bin     string
	cfgPath string
	listen  string // host:port of the delivery listener
	admin   string // host:port of the admin listener
	logPath string
	starts  int
}

func (g *gatewayProc) start(ctx context.Context, t0 time.Time, needReady bool) error {
	var last error
	for try := 0; try < 20; try++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if last = g.startOnce(ctx, t0, needReady); last == nil {
			return nil
		}
		if !strings.Contains(last.Error(), "address already in use") {
			return last
		}
		// A port of ours was briefly taken (a TIME_WAIT peer, an outgoing
		// connection's ephemeral port): try again shortly.
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

func (g *gatewayProc) startOnce(ctx context.Context, t0 time.Time, needReady bool) error {
	g.starts++
	if f, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintf(f, "# soak: instance %d start #%d at %+.3fs\n", g.idx, g.starts, time.Since(t0).Seconds())
		f.Close()
	}
	// -log-flush 0: every line reaches the file before a SIGKILL can drop it.
	cmd, done, err := g.launch(g.bin, []string{"serve", "-config", g.cfgPath, "-log-flush", "0", "-grace", "3s"}, g.logPath)
	if err != nil {
		return err
	}
	path := "/healthz"
	if needReady {
		path = "/readyz"
	}
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			g.forget(cmd)
			return fmt.Errorf("gateway %d exited at start: %s", g.idx, tail(g.logPath, 2000))
		case <-ctx.Done():
			g.kill()
			return ctx.Err()
		default:
		}
		if resp, err := client.Get("http://" + g.admin + path); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			g.kill()
			return fmt.Errorf("gateway %d: %s did not answer 200 within 15s: %s", g.idx, path, tail(g.logPath, 2000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill SIGKILLs the instance and returns the time it was seen dead.
func (g *gatewayProc) kill() time.Time { return g.signalAndWait(syscall.SIGKILL, 10*time.Second) }

// stop drains the instance with SIGTERM (SIGKILL after 6 s).
func (g *gatewayProc) stop() { g.signalAndWait(syscall.SIGTERM, 6*time.Second) }

// ---------------------------------------------------------------- helpers

// pickPort returns a loopback port that was free a moment ago. It prefers
// ports below the kernel's ephemeral range, so that an outgoing connection
// cannot take a port while its server is down for a restart.
func pickPort() (int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	if lo > 12000 {
		for try := 0; try < 100; try++ {
			p := 10000 + rand.IntN(lo-10000)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
