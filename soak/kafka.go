package main

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kafkaBroker is the Kafka of a queue soak on Kafka: franz-go's kfake, one
// broker inside the soak process, on a 127.0.0.1 port the kernel picked,
// persisting to a data directory. Being in-process it cannot be SIGKILLed
// apart from the soak: a broker restart is a clean stop (kfake saves its
// state) and a start on the same port that loads it again.
type kafkaBroker struct {
	mu   sync.Mutex
	c    *kfake.Cluster // nil while stopped
	opts []kfake.Opt
	port int
}

func startKafka(dir string) (*kafkaBroker, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(dir), kfake.SyncWrites()}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return nil, fmt.Errorf("kfake: %d listen addresses, want 1", len(addrs))
	}
	_, p, err := net.SplitHostPort(addrs[0])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("kfake: listen address %q: %w", addrs[0], err)
	}
	port, _ := strconv.Atoi(p)
	return &kafkaBroker{c: c, opts: opts, port: port}, nil
}

// addr is the broker's host:port, the same across restarts.
func (k *kafkaBroker) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.port)) }

// stop closes the broker (clients see refused connections) and returns when
// it is down; safe to repeat.
func (k *kafkaBroker) stop() time.Time {
	k.mu.Lock()
	c := k.c
	k.c = nil
	k.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return time.Now()
}

// start brings a stopped broker back on its port with what it had saved,
// trying for up to 10 s while the old listener's port is not yet free.
func (k *kafkaBroker) start() error {
	opts := append(append([]kfake.Opt(nil), k.opts...), kfake.Ports(k.port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := kfake.NewCluster(opts...)
		if err == nil {
			k.mu.Lock()
			k.c = c
			k.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kfake: restart on %s: %w", k.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
