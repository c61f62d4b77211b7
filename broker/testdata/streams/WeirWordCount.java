// A Kafka Streams word count, compiled with javac at test time (broker/txn_streams_test.go) and
// run against weir with processing.guarantee=exactly_once_v2. The topology has a repartition
// topic (groupBy on the word) and a state store with a changelog (count), so the exactly-once
// machinery of Streams is really used: every commit is one transaction that writes the
// repartition records, the changelog records, the output records and the consumed offsets.
//
// Usage: java -cp <kafka jars>:<classes> WeirWordCount <properties file>
// The properties are StreamsConfig keys plus weir.input.topic and weir.output.topic. Output
// values are the counts as 8-byte big-endian longs. The program prints each state change as
// "STATE OLD -> NEW" and stops on SIGTERM (closing Streams, then printing "CLOSED true|false ...")
// or when Streams reaches ERROR (exit status 1).
import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class WeirWordCount {
    public static void main(final String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: WeirWordCount <properties file>");
            System.exit(2);
        }
        final Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        final String input = (String) props.remove("weir.input.topic");
        final String output = (String) props.remove("weir.output.topic");
        if (input == null || output == null) {
            System.err.println("weir.input.topic and weir.output.topic are required");
            System.exit(2);
        }
        props.putIfAbsent(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);

        final StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("word-counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        final KafkaStreams streams = new KafkaStreams(builder.build(), props);
        final CountDownLatch stopped = new CountDownLatch(1);
        final AtomicBoolean failed = new AtomicBoolean();
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + before + " -> " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed.set(true);
                stopped.countDown();
            }
        });
        // A thread that dies (for example on a timeout while a broker restarts) is replaced, as
        // a production application would configure it; the error is printed for the test log.
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace(System.out);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        final Thread hook = new Thread(() -> {
            final long start = System.nanoTime();
            final boolean closed = streams.close(Duration.ofSeconds(30));
            System.out.println("CLOSED " + closed + " after " + (System.nanoTime() - start) / 1_000_000 + " ms, state " + streams.state());
            System.out.flush();
            stopped.countDown();
        });
        Runtime.getRuntime().addShutdownHook(hook);
        streams.start();
        stopped.await();
        if (failed.get()) {
            System.exit(1);
        }
    }
}
