// Command kfake is the benchmark's Kafka: franz-go's kfake, an in-process
// Go fake of a Kafka cluster, run as its own process for bench/run.sh's
// clawgate-kafka-queue target. It keeps everything in memory (no disk, no
// replication: one copy of each record in this process) and handles every
// request on one goroutine, so its figures are not a real cluster's.
//
//	kfake -port 0 -addr-file kafka.addr
//
// It listens on 127.0.0.1 only (kfake binds nothing else), on -port (0: an
// ephemeral port), prints the brokers' addresses, comma-separated, on
// stdout (and writes them to -addr-file, once they accept connections),
// and stops on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "`port` of the first broker on 127.0.0.1 (0: ephemeral); broker i listens on port+i")
	brokers := flag.Int("brokers", 1, "number of brokers (kfake runs them all in this process)")
	partitions := flag.Int("default-partitions", 8, "partitions of topics created without a count")
	addrFile := flag.String("addr-file", "", "write the brokers' addresses (comma-separated) to this `file`")
	logLevel := flag.String("log", "none", "kfake's log level, to stderr: none, error, warn, info or debug")
	flag.Parse()

	if *brokers < 1 || *brokers > 16 {
		fatalf("kfake: -brokers %d: from 1 to 16", *brokers)
	}
	if *port < 0 || *port > 65535 || (*port > 0 && *port+*brokers-1 > 65535) {
		fatalf("kfake: -port %d out of range", *port)
	}
	if *partitions < 1 {
		fatalf("kfake: -default-partitions %d must be at least 1", *partitions)
	}
	levels := map[string]kfake.LogLevel{
		"none": kfake.LogLevelNone, "error": kfake.LogLevelError, "warn": kfake.LogLevelWarn,
		"info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug,
	}
	level, ok := levels[*logLevel]
	if !ok {
		fatalf("kfake: -log %q: none, error, warn, info or debug", *logLevel)
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
		kfake.DefaultNumPartitions(*partitions),
		kfake.ClusterID("clawgate-bench"),
	}
	if *port > 0 {
		ports := make([]int, *brokers)
		for i := range ports {
			ports[i] = *port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	if level != kfake.LogLevelNone {
		opts = append(opts, kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)))
	}

	// Signals are caught before the listeners open, so a SIGTERM sent as
	// soon as the address is known still closes the cluster cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fatalf("kfake: %v", err)
	}
	addrs := strings.Join(c.ListenAddrs(), ",")
	fmt.Println(addrs)
	if *addrFile != "" {
		// Written whole under another name, then renamed: a reader polling
		// the file never sees half of it.
		tmp := *addrFile + ".tmp" + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, []byte(addrs+"\n"), 0o644); err != nil {
			c.Close()
			fatalf("kfake: %v", err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			c.Close()
			fatalf("kfake: %v", err)
		}
	}
	<-sig
	c.Close()
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
