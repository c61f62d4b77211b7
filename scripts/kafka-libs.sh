#!/usr/bin/env bash
# Resolves Apache Kafka's jars (broker, tools, Kafka Streams) from Maven Central into a cache
# folder and prints that folder. Tests use it to run Kafka's own tools (DumpLogSegments,
# TransactionalMessageCopier) and a Kafka Streams application against weir:
#   export WEIR_KAFKA_LIBS=$(scripts/kafka-libs.sh)
# KAFKA_VERSION (default 4.4.0), WEIR_KAFKA_CACHE (default ~/.cache/weir-kafka).
# The cache is $WEIR_KAFKA_CACHE/$version/libs; the marker file says which jar set it holds, so
# a cache filled by an older version of this script (no kafka-streams) is refreshed.
set -euo pipefail
version="${KAFKA_VERSION:-4.4.0}"
dir="${WEIR_KAFKA_CACHE:-$HOME/.cache/weir-kafka}/$version"
marker="$dir/.complete-2" # bump when the dependency list below changes
if [[ -f "$marker" ]]; then echo "$dir/libs"; exit 0; fi
mkdir -p "$dir"
cat >"$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>weir.test</groupId><artifactId>kafka-libs</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
(cd "$dir" && mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DoutputDirectory="$dir/libs" -DincludeScope=runtime >&2)
for jar in kafka-tools kafka-streams; do
  [[ -f "$dir/libs/$jar-$version.jar" ]] || { echo "$jar-$version.jar missing" >&2; exit 1; }
done
touch "$marker"
echo "$dir/libs"
