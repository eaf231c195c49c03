package conf

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// KafkaPasswordEnv is the environment variable the prediction log's
// readers take the SASL password from when --kafka-sasl-password is not
// given (a flag's value shows in the process list).
const KafkaPasswordEnv = "GROVE_KAFKA_SASL_PASSWORD"

// KafkaClientFlags defines on fs the flags of the CLI commands that read
// the prediction log from Kafka: --config (a grove serve YAML file, whose
// kafka section they use) and one flag per key of kafka.tls and
// kafka.sasl, named after the key ("kafka.tls.ca_file":
// --kafka-tls-ca-file). Called after fs.Parse, the returned function
// gives the kafka section: the defaults, overlaid by the --config file,
// then by the flags that were set (and the SASL password by
// $GROVE_KAFKA_SASL_PASSWORD when neither sets one), with the problems of
// its tls and sasl keys, as grove serve reports them: an unknown
// --kafka-sasl-mechanism among them.
func KafkaClientFlags(fs *flag.FlagSet) func() (Kafka, error) {
	configFile := fs.String("config", "", "grove serve's YAML config `file`: read Kafka as the server writes to it (kafka.brokers, topic, tls, sasl); flags override it")
	apply := map[string]func(*Kafka) error{}
	str := func(key, usage string) *string { return fs.String(kafkaFlagName(key), "", usage) }
	boolean := func(key, usage string) *bool { return fs.Bool(kafkaFlagName(key), false, usage) }
	tlsOn := boolean("kafka.tls.enabled", "connect to the brokers over TLS (kafka.tls.enabled)")
	ca := str("kafka.tls.ca_file", "PEM `file` of the CAs of the brokers' certificates, instead of the system's (kafka.tls.ca_file)")
	cert := str("kafka.tls.cert_file", "PEM client certificate `file` for mutual TLS, with --kafka-tls-key-file (kafka.tls.cert_file)")
	key := str("kafka.tls.key_file", "PEM `file` of the key of --kafka-tls-cert-file (kafka.tls.key_file)")
	skip := boolean("kafka.tls.insecure_skip_verify", "accept any broker certificate, for testing only (kafka.tls.insecure_skip_verify)")
	mech := str("kafka.sasl.mechanism", "SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (kafka.sasl.mechanism)")
	user := str("kafka.sasl.username", "SASL `user` (kafka.sasl.username)")
	pass := str("kafka.sasl.password", "SASL `password` (kafka.sasl.password; better $"+KafkaPasswordEnv+", which a process list does not show)")
	apply[kafkaFlagName("kafka.tls.enabled")] = func(k *Kafka) error { k.TLS.Enabled = *tlsOn; return nil }
	apply[kafkaFlagName("kafka.tls.ca_file")] = func(k *Kafka) error { k.TLS.CAFile = *ca; return nil }
	apply[kafkaFlagName("kafka.tls.cert_file")] = func(k *Kafka) error { k.TLS.CertFile = *cert; return nil }
	apply[kafkaFlagName("kafka.tls.key_file")] = func(k *Kafka) error { k.TLS.KeyFile = *key; return nil }
	apply[kafkaFlagName("kafka.tls.insecure_skip_verify")] = func(k *Kafka) error { k.TLS.InsecureSkipVerify = *skip; return nil }
	apply[kafkaFlagName("kafka.sasl.mechanism")] = func(k *Kafka) error {
		if err := k.SASL.Mechanism.UnmarshalText([]byte(*mech)); err != nil {
			return fmt.Errorf("kafka.sasl.mechanism (--%s): %w", kafkaFlagName("kafka.sasl.mechanism"), err)
		}
		return nil
	}
	apply[kafkaFlagName("kafka.sasl.username")] = func(k *Kafka) error { k.SASL.Username = *user; return nil }
	apply[kafkaFlagName("kafka.sasl.password")] = func(k *Kafka) error { k.SASL.Password = *pass; return nil }
	return func() (Kafka, error) {
		s := DefaultServer()
		if *configFile != "" {
			if err := loadServerFile(*configFile, &s); err != nil {
				return Kafka{}, err
			}
		}
		k := s.Kafka
		passSet := false
		var errs []error
		fs.Visit(func(f *flag.Flag) {
			if set, ok := apply[f.Name]; ok {
				if err := set(&k); err != nil {
					errs = append(errs, err)
				}
				passSet = passSet || f.Name == kafkaFlagName("kafka.sasl.password")
			}
		})
		if !passSet && k.SASL.Password == "" {
			k.SASL.Password = os.Getenv(KafkaPasswordEnv)
		}
		return k, errors.Join(append(errs, k.validateClient())...)
	}
}

// kafkaFlagName is the CLI flag of a kafka.tls or kafka.sasl key: the key
// with '.' and '_' as '-'.
func kafkaFlagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// validateClient reports the problems of k's tls and sasl keys, each
// naming its key and CLI flag.
func (k Kafka) validateClient() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		if strings.HasPrefix(key, "kafka.tls.") || strings.HasPrefix(key, "kafka.sasl.") {
			errs = append(errs, fmt.Errorf("%s (--%s): %s", key, kafkaFlagName(key), fmt.Sprintf(format, args...)))
		}
	}
	k.validate(bad)
	return errors.Join(errs...)
}
