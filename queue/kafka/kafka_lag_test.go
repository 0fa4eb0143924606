package kafka

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// TestKafkaConsumerLag: what the Lag callback reports (kafka_consumer_lag)
// agrees with the lag kadm computes for the main topic's group: end
// offsets minus committed offsets, summed over the main topic's
// partitions. 10 events on one partition, the first 4 delivered: 6.
func TestKafkaConsumerLag(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t)
	var mu sync.Mutex
	reported := map[string]int64{}
	reports := 0
	b := newBackend(t, kc, ledger.NewMemory(nil), func(o *Options) {
		o.Partitions = 1
		o.LagEvery = 20 * time.Millisecond
		o.Lag = func(route string, lag int64) {
			mu.Lock()
			reported[route] = lag
			reports++
			mu.Unlock()
		}
	})
	last := func() (int64, bool, int) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := reported[testRoute]
		return v, ok, reports
	}
	for i := range 10 {
		mustEnqueue(t, b, fmt.Sprintf("l%02d", i), queue.Enqueued)
	}
	ls := readN(t, b, "w", 4)
	for _, l := range ls[:4] {
		mustSettle(t, b, "w", mustBegin(t, b, l), delivered("{}"))
	}
	adm := kc.Admin(t)
	kadmLag := func() (int64, error) {
		lags, err := adm.Lag(t.Context(), mainGroup)
		if err != nil {
			return 0, err
		}
		gl, ok := lags[mainGroup]
		if !ok {
			return 0, fmt.Errorf("no lag for group %s", mainGroup)
		}
		if err := gl.Error(); err != nil {
			return 0, err
		}
		var sum int64
		for _, p := range gl.Lag[mainTopic] {
			if p.Err != nil {
				return 0, p.Err
			}
			sum += p.Lag
		}
		return sum, nil
	}
	want := int64(10 - len(ls[:4]))
	eventually(t, bound, func() bool {
		k, err := kadmLag()
		v, ok, _ := last()
		return err == nil && ok && k == want && v == want
	}, func() string {
		k, err := kadmLag()
		v, ok, n := last()
		return fmt.Sprintf("kafka_consumer_lag %d (reported %v, %d reports), kadm lag %d (%v), want both %d", v, ok, n, k, err, want)
	})

	// Deliver the rest: both come down to 0.
	rest := len(ls) - 4
	for _, l := range ls[4:] {
		mustSettle(t, b, "w", mustBegin(t, b, l), delivered("{}"))
	}
	for _, l := range readN(t, b, "w", 6-rest) {
		mustSettle(t, b, "w", mustBegin(t, b, l), delivered("{}"))
	}
	eventually(t, bound, func() bool {
		k, err := kadmLag()
		v, ok, _ := last()
		return err == nil && ok && k == 0 && v == 0
	}, func() string {
		k, err := kadmLag()
		v, _, _ := last()
		return fmt.Sprintf("kafka_consumer_lag %d, kadm lag %d (%v), want both 0", v, k, err)
	})
}
