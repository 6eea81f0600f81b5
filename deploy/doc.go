// Package deploy holds the container image recipe (Dockerfile), the
// Kubernetes manifests (kubernetes/), the alert rules (prometheus/), a
// Grafana dashboard (grafana/) and a Compose file for a local trial of the
// Azure path (compose.yaml). It has no code: its tests build the static
// binary the image ships, check that the manifests parse, pass only flags
// the binary has and reference only Secrets that exist, run the purge
// CronJob's grpcurl command against a server started with the
// StatefulSet's own arguments, parse the rules as promtool does and every
// dashboard query with the PromQL parser against the series a running
// daemon serves, run the Compose file's metadatad command against Azurite,
// and run the README's secured-deployment examples. Docker itself is never
// needed.
package deploy
