package broker

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
)

// The TPS figures of GET_BROKER_RUNTIME_INFO (putTps, getTransferredTps),
// as Apache's StoreStatsService computes them: the counters are sampled
// once a second into a list of at most 601 samples, and the rate over the
// last n seconds is (last - sample[len-1-n]) / elapsed, for n = 10, 60 and
// 600. A window the list is too short for is an empty string, as in Apache
// (so putTps reads " " in the broker's first ten seconds).
const (
	rateEvery      = time.Second
	rateMaxSamples = 600 + 1
)

// rateSample is the counters at one moment: messages stored (both
// protocols) and messages handed to pulling consumers.
type rateSample struct {
	at       time.Time
	put, get uint64
}

// rates holds the samples, oldest first.
type rates struct {
	mu      sync.Mutex
	samples []rateSample
	boot    time.Time
}

func newRates(boot time.Time) *rates {
	return &rates{boot: boot, samples: make([]rateSample, 0, rateMaxSamples)}
}

func (r *rates) add(s rateSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == rateMaxSamples {
		copy(r.samples, r.samples[1:])
		r.samples = r.samples[:rateMaxSamples-1]
	}
	r.samples = append(r.samples, s)
}

// tps is the rate of pick over the last n samples' span, or "".
func (r *rates) tps(n int, pick func(rateSample) uint64) string {
	if len(r.samples) <= n {
		return ""
	}
	last, before := r.samples[len(r.samples)-1], r.samples[len(r.samples)-1-n]
	ms := last.at.Sub(before.at).Milliseconds()
	if ms <= 0 {
		return ""
	}
	return meta.JavaDouble(float64(pick(last)-pick(before)) / float64(ms) * 1000)
}

// line is Apache's "tps10 tps60 tps600".
func (r *rates) line(pick func(rateSample) uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join([]string{r.tps(10, pick), r.tps(60, pick), r.tps(600, pick)}, " ")
}

func samplePut(s rateSample) uint64 { return s.put }
func sampleGet(s rateSample) uint64 { return s.get }

// runtime is Apache's "[ d days, h hours, m minutes, s seconds ]" since boot.
func (r *rates) runtime(now time.Time) string {
	t := now.Sub(r.boot)
	if t < 0 {
		t = 0
	}
	day := 24 * time.Hour
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]",
		t/day, t%day/time.Hour, t%time.Hour/time.Minute, t%time.Minute/time.Second)
}

// sampleRates samples the counters until the broker closes.
func (b *Broker) sampleRates() {
	defer b.wg.Done()
	t := time.NewTicker(rateEvery)
	defer t.Stop()
	for {
		b.rates.add(b.rateSample(time.Now()))
		select {
		case <-t.C:
		case <-b.ctx.Done():
			return
		}
	}
}

func (b *Broker) rateSample(at time.Time) rateSample {
	return rateSample{at: at, put: b.st.Stats().Messages, get: b.stats.pulled.Load()}
}
