GO ?= go
PKGS := ./...

.PHONY: run test bench bench-compare lint fuzz build

build:
	$(GO) build -o bin/weir ./cmd/weir

## run: a single broker on 127.0.0.1:9092 with data in ./data (docs/server.properties: group.initial.rebalance.delay.ms=0, as Kafka's shipped server.properties)
run: build
	./bin/weir serve --config docs/server.properties

## test: vet, unit and integration tests (race detector on), the crash test and fuzz seed corpora, the fault smoke run, and the tests of the -tags faults build
test: lint
	$(GO) test -race -count=1 -timeout 14m $(PKGS)
	$(GO) test -race -count=1 -timeout 5m -tags faults ./internal/faultctl/ ./itest/clockjump/

## bench: every go test -bench suite, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

## bench-compare: the benchmark suites at OLD=<git rev> vs the working tree, several runs each, benchstat
bench-compare:
	@test -n "$(OLD)" || { echo "usage: make bench-compare OLD=<git rev> [COUNT=6] [BENCH=regexp]"; exit 2; }
	scripts/bench-compare.sh $(OLD)

## cluster: three brokers on 127.0.0.1:9092-9094 (controllers on 19093-19095), data and logs in ./data-cluster/node-N
.PHONY: cluster
cluster:
	$(GO) build -o bin/weir ./cmd/weir && ./bin/weir dev-cluster -n 3

## bench-vs-kafka: weir against Apache Kafka: `weir bench` workloads (transactional ones too), then Kafka's own tools
##   (ProducerPerformance, ConsumerPerformance, EndToEndLatency); REPS=3 (QUICK=1: one short repetition; TOOLS=0; OUT=dir)
.PHONY: bench-vs-kafka
bench-vs-kafka: build
	WEIR_BIN="$${WEIR_BIN:-$(CURDIR)/bin/weir}" scripts/bench-vs-kafka.sh $(OUT)

## bench-kafka-tools: only the Kafka tools matrix of bench-vs-kafka (QUICK=1, REPS, MODES, TOOLS_*; OUT=dir)
.PHONY: bench-kafka-tools
bench-kafka-tools: build
	WEIR_BIN="$${WEIR_BIN:-$(CURDIR)/bin/weir}" scripts/bench-kafka-tools.sh $(OUT)

## bench-cluster: 3-broker weir cluster (RF=3): acks=all produce vs a 3-node Kafka, failover time, follower catch-up (QUICK=1; OUT=dir)
.PHONY: bench-cluster
bench-cluster:
	scripts/bench-cluster.sh $(OUT)

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRecover$$' -fuzztime $(FUZZTIME) ./engine/
	$(GO) test -run '^$$' -fuzz '^FuzzRecoverTxn$$' -fuzztime $(FUZZTIME) ./engine/
	$(GO) test -run '^$$' -fuzz FuzzValidate -fuzztime $(FUZZTIME) ./record/
	$(GO) test -run '^$$' -fuzz FuzzRecordReader -fuzztime $(FUZZTIME) ./record/
	$(GO) test -run '^$$' -fuzz FuzzRecompress -fuzztime $(FUZZTIME) ./record/
	$(GO) test -run '^$$' -fuzz FuzzDispatch -fuzztime $(FUZZTIME) ./broker/
	$(GO) test -run '^$$' -fuzz FuzzControllerRPC -fuzztime $(FUZZTIME) ./controller/
	$(GO) test -run '^$$' -fuzz '^FuzzScram$$' -fuzztime $(FUZZTIME) ./broker/
	$(GO) test -run '^$$' -fuzz '^FuzzScanProduce$$' -fuzztime $(FUZZTIME) ./broker/
	$(GO) test -run '^$$' -fuzz FuzzOffsetsRecord -fuzztime $(FUZZTIME) ./coordinator/
	$(GO) test -run '^$$' -fuzz FuzzTxnLogRecord -fuzztime $(FUZZTIME) ./txncoord/
	$(GO) test -run '^$$' -fuzz '^FuzzFetchSessionCache$$' -fuzztime $(FUZZTIME) ./broker/

lint:
	$(GO) vet -tags faults ./internal/faultctl/ ./itest/clockjump/ ./broker/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## kafka-tools: Kafka's own admin tools (TopicCommand, ConfigCommand, ...) against a 3-broker weir cluster on 127.0.0.1:41200-41202; table in OUT/results.md
.PHONY: kafka-tools
kafka-tools: build
	WEIR_BIN="$${WEIR_BIN:-$(CURDIR)/bin/weir}" scripts/kafka-tools.sh $(OUT)
