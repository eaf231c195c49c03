package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

const logsTailUsage = `Usage: grove logs tail [flags]

Prints the prediction log's events as JSON lines: one grove.v1.PredictionEvent
per line, in protojson with the .proto field names (snake_case, e.g.
"model_path", "request_id"), fields at their default value left out (a
missing "served" is false), 64-bit integers as strings ("shape":["1","64"]).
See grovepb/proto/grove/v1/prediction_event.proto. Records of either encoding
(proto or json) are read; records that do not decode are reported on stderr
and skipped.

Without --follow it stops at the end of the log as it was when it started;
without --from-beginning it starts at that end, so only --follow shows
anything then. With --follow it runs until interrupted (SIGINT, SIGTERM).

Example: grove logs tail --brokers 127.0.0.1:9092 --from-beginning --model pctr_v1/ | jq .outputs
` + kafkaUsage + `
Flags:
`

// kafkaUsage is the part of the usage of the commands that read the
// prediction log that says how they reach Kafka.
const kafkaUsage = `
Kafka is reached as grove serve reaches it: --config FILE takes the
server's YAML config (kafka.brokers, kafka.topic, kafka.tls, kafka.sasl),
and each kafka.tls and kafka.sasl key has a flag of its name that
overrides the file: --kafka-tls-enabled, --kafka-tls-ca-file,
--kafka-tls-cert-file, --kafka-tls-key-file,
--kafka-tls-insecure-skip-verify, --kafka-sasl-mechanism,
--kafka-sasl-username and --kafka-sasl-password (better
$GROVE_KAFKA_SASL_PASSWORD, which a process list does not show).
`

// logs runs "grove logs SUBCOMMAND".
func logs(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "tail" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, "usage: grove logs tail [flags]   (grove logs tail -h for flags)\n")
			return 0
		}
		fmt.Fprint(stderr, "usage: grove logs tail [flags]   (grove logs tail -h for flags)\n")
		return 2
	}
	fs := flag.NewFlagSet("grove logs tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var src logSource
	src.flags(fs)
	fromBeginning := fs.Bool("from-beginning", false, "start at the oldest event instead of the end of the log")
	follow := fs.Bool("follow", false, "keep waiting for new events until interrupted")
	model := fs.String("model", "", "print only events of this model `path` (\"pctr_v1/\"; a trailing / is optional)")
	contract := fs.String("contract", "", "print only events routed through this `contract` (org/project/n)")
	limit := fs.Int("limit", 0, "stop after printing `N` events (0: no limit)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), logsTailUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "grove logs tail: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	mo := protojson.MarshalOptions{UseProtoNames: true}
	printed := 0
	err := src.read(ctx, *fromBeginning, *follow, stderr, func(ev *grovepb.PredictionEvent) (bool, error) {
		if !modelMatches(*model, ev.GetModelPath()) || (*contract != "" && ev.GetContract() != *contract) {
			return true, nil
		}
		b, err := mo.Marshal(ev)
		if err != nil {
			return false, err
		}
		out.Write(b)
		out.WriteByte('\n')
		printed++
		if *follow {
			if err := out.Flush(); err != nil {
				return false, err
			}
		}
		return *limit <= 0 || printed < *limit, nil
	})
	if err := out.Flush(); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(stderr, "grove logs tail: %v\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "grove logs tail: %v\n", err)
		return 1
	}
	return 0
}

// modelMatches reports whether an event's model path matches the --model
// filter want (empty: any); a trailing slash is optional on either.
func modelMatches(want, got string) bool {
	return want == "" || strings.TrimSuffix(want, "/") == strings.TrimSuffix(got, "/")
}

// logSource is the prediction log topic a command reads: the flags
// --brokers, --topic and --timeout, and the server's Kafka TLS and SASL
// settings (conf.KafkaClientFlags: --config and the kafka-tls-*,
// kafka-sasl-* flags).
type logSource struct {
	brokers string
	topic   string
	timeout time.Duration
	fs      *flag.FlagSet
	kafka   func() (conf.Kafka, error)
}

func (s *logSource) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.brokers, "brokers", "127.0.0.1:9092", "Kafka seed `brokers`, comma-separated host:port; unset, --config's kafka.brokers if it has them")
	fs.StringVar(&s.topic, "topic", "grove.predictions", "the prediction log `topic`; unset, --config's kafka.topic if --config is given")
	fs.DurationVar(&s.timeout, "timeout", 10*time.Second, "how long to wait for a broker to answer before giving up")
	s.fs, s.kafka = fs, conf.KafkaClientFlags(fs)
}

// clientOptions resolves the brokers, the topic and the Kafka TLS and
// SASL settings (a --config file's, under the flags given) and returns
// the seed brokers and the franz-go options every client of the topic
// takes.
func (s *logSource) clientOptions() ([]string, []kgo.Opt, error) {
	k, err := s.kafka()
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["brokers"] {
		switch {
		case len(k.Brokers) > 0:
			s.brokers = strings.Join(k.Brokers, ",")
		case k.Embedded:
			s.brokers = k.EmbeddedAddr
		}
	}
	if !set["topic"] && set["config"] {
		s.topic = k.Topic
	}
	var seeds []string
	for _, b := range strings.Split(s.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		return nil, nil, errors.New("--brokers is empty")
	}
	if s.topic == "" {
		return nil, nil, errors.New("--topic is empty")
	}
	sec, err := logging.SecurityOptions(k)
	if err != nil {
		return nil, nil, err
	}
	return seeds, append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(s.timeout)}, sec...), nil
}

// read calls fn with every event of the topic, in offset order within each
// partition, until fn returns false or an error, ctx is done, or, unless
// follow, every partition has reached the end it had when read started.
// It starts at the oldest event with fromBeginning, else at the end.
// Records that do not decode are reported on stderr and skipped. (Without
// follow, a partition ending in transaction markers would keep it waiting;
// Grove's producer writes none.)
func (s *logSource) read(ctx context.Context, fromBeginning, follow bool, stderr io.Writer,
	fn func(*grovepb.PredictionEvent) (bool, error)) error {
	seeds, base, err := s.clientOptions()
	if err != nil {
		return err
	}
	// The overhead bounds the connection handshake too, which Ping's
	// context does not.
	admin, err := kgo.NewClient(append(slices.Clip(base), kgo.RequestTimeoutOverhead(s.timeout))...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer admin.Close()
	ends, err := s.watermarks(ctx, admin, seeds)
	if err != nil {
		return err
	}
	start := kgo.NewOffset().AtEnd()
	if fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	opts := slices.Clip(base)
	// next[p] is the first offset not read yet of each partition still to be read when not following.
	next := make(map[int32]int64)
	if follow {
		opts = append(opts, kgo.ConsumeTopics(s.topic), kgo.ConsumeResetOffset(start))
	} else {
		parts := make(map[int32]kgo.Offset)
		for p, w := range ends {
			if fromBeginning && w.low < w.high {
				parts[p] = kgo.NewOffset().At(w.low)
				next[p] = w.low
			}
		}
		if len(parts) == 0 {
			return nil
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: parts}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())) // if the oldest events were deleted meanwhile
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	bad := 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, kgo.ErrClientClosed) {
				return nil
			}
			return fmt.Errorf("reading %s partition %d: %w", e.Topic, e.Partition, e.Err)
		}
		var ferr error
		more := true
		fs.EachRecord(func(r *kgo.Record) {
			if !more || ferr != nil {
				return
			}
			if !follow {
				if r.Offset >= ends[r.Partition].high {
					return // logged after the start
				}
				next[r.Partition] = r.Offset + 1
			}
			ev, err := logging.Decode(r.Value, r.Headers)
			if err != nil {
				bad++
				fmt.Fprintf(stderr, "grove: skipping %s/%d offset %d: %v\n", r.Topic, r.Partition, r.Offset, err)
				return
			}
			more, ferr = fn(ev)
		})
		if ferr != nil || !more {
			return ferr
		}
		if !follow {
			done := true
			for p, n := range next {
				if n < ends[p].high {
					done = false
				}
			}
			if done {
				return nil
			}
		}
	}
}

// watermark is a partition's first offset and the offset after its last record.
type watermark struct{ low, high int64 }

// watermarks checks within s.timeout that a broker answers and that the
// topic exists, and returns its partitions' watermarks.
func (s *logSource) watermarks(ctx context.Context, cl *kgo.Client, seeds []string) (map[int32]watermark, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	brokers := strings.Join(seeds, ",")
	if err := cl.Ping(ctx); err != nil {
		return nil, fmt.Errorf("cannot reach the Kafka broker %s within %v: %w", brokers, s.timeout, err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(s.topic)
	meta.Topics = append(meta.Topics, mt)
	meta.AllowAutoTopicCreation = false
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka broker %s: topic metadata: %w", brokers, err)
	}
	var parts []int32
	for _, t := range mresp.Topics {
		if t.Topic == nil || *t.Topic != s.topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("topic %q does not exist on the Kafka broker %s", s.topic, brokers)
			}
			return nil, fmt.Errorf("topic %q on the Kafka broker %s: %w", s.topic, brokers, err)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.Partition)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %q does not exist on the Kafka broker %s", s.topic, brokers)
	}
	out := make(map[int32]watermark, len(parts))
	for _, ts := range []int64{-2, -1} { // earliest, latest
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = s.topic
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("kafka broker %s: listing offsets of %q: %w", brokers, s.topic, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("kafka broker %s: offsets of %s partition %d: %w", brokers, s.topic, p.Partition, err)
				}
				w := out[p.Partition]
				if ts == -2 {
					w.low = p.Offset
				} else {
					w.high = p.Offset
				}
				out[p.Partition] = w
			}
		}
	}
	return out, nil
}
