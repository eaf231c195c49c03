package logging

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/servables"
)

// BenchmarkLog measures Log, end to end to a kfake broker on loopback that
// acknowledges and discards the records: an event like the README's pCTR
// call (64 FLOAT inputs, one output, two configs), keyed. events/s includes
// the final Flush; dropped/op shows whether the buffer kept up.
func BenchmarkLog(b *testing.B) {
	for _, bc := range []struct {
		name     string
		encoding conf.Encoding
		parallel bool
	}{
		{"proto", conf.EncodingProto, false},
		{"json", conf.EncodingJSON, false},
		{"proto-parallel", conf.EncodingProto, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "grove.predictions"), kfake.BlackholeProduce())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := kafkaConfig(c.ListenAddrs()...)
			cfg.Encoding = bc.encoding
			cfg.Linger = 5 * time.Millisecond
			p := newProducer(b, cfg)
			in, _ := servables.NewTensor("", servables.Float32, []int64{1, 64})
			for i := range in.Float32s() {
				in.Float32s()[i] = float32(i) / 64
			}
			out, _ := servables.NewTensor("", servables.Float32, []int64{1, 1})
			configs := map[string]string{"user": "u-12345678", "campaign": "c-42"}
			policy := Policy{Level: LevelFull, KeyFeatures: []string{"user", "campaign"}, Separator: "."}
			logOne := func() {
				if policy.Decide(nil) {
					p.Log(&grovepb.PredictionEvent{
						RequestId: "req", Api: "ba", ModelPath: "pctr_v1/", ModelChecksum: "dd94b3b08ea19b42",
						Served: true, Configs: configs,
						Inputs:  TensorsToProto([]servables.Tensor{in}),
						Outputs: TensorsToProto([]servables.Tensor{out}),
					}, policy.Key(configs))
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						logOne()
					}
				})
			} else {
				for range b.N {
					logOne()
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s := p.Stats()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64(s.Dropped)/float64(b.N), "dropped/op")
			if s.Failed != 0 {
				b.Errorf("stats %+v", s)
			}
		})
	}
}
