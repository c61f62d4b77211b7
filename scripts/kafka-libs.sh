#!/usr/bin/env bash
# Resolves Apache Kafka's jars (broker + tools) from Maven Central into a cache folder and prints
# that folder. Tests use it to run Kafka's own tools (DumpLogSegments) against weir's files:
#   export WEIR_KAFKA_LIBS=$(scripts/kafka-libs.sh)
# KAFKA_VERSION (default 4.4.0), WEIR_KAFKA_CACHE (default ~/.cache/weir-kafka).
set -euo pipefail
version="${KAFKA_VERSION:-4.4.0}"
dir="${WEIR_KAFKA_CACHE:-$HOME/.cache/weir-kafka}/$version"
if [[ -f "$dir/.complete" ]]; then echo "$dir/libs"; exit 0; fi
mkdir -p "$dir"
cat >"$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>weir.test</groupId><artifactId>kafka-libs</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
(cd "$dir" && mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DoutputDirectory="$dir/libs" -DincludeScope=runtime >&2)
[[ -f "$dir/libs/kafka-tools-$version.jar" ]] || { echo "kafka-tools-$version.jar missing" >&2; exit 1; }
touch "$dir/.complete"
echo "$dir/libs"
