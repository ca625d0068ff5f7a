#!/bin/sh
# Apache Kafka's broker for the Kafka tests (tests/unit/test_kafka.cc):
# org.apache.kafka:kafka_2.13 and its runtime jars from Maven Central, with
# Debian's maven, into DEST/jars; fetched once (about 10 s, 45 MB) and
# reused by later runs. Concurrent callers wait for one fetch (flock).
# Exit status 0: DEST/jars holds the broker; otherwise the reason is printed.
set -eu
DEST=${1:?usage: fetch_kafka.sh DEST}
VERSION=3.7.2
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
[ -f "$DEST/jars/.complete-$VERSION" ] && exit 0
for tool in java mvn; do
  command -v $tool > /dev/null || { echo "no $tool (build.sh's PACKAGES: default-jre-headless maven)"; exit 2; }
done
rm -rf "$DEST/jars" "$DEST/jars.part" "$DEST/m2"
cat > "$DEST/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sluice.test</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM
if ! mvn -q -B -f "$DEST/pom.xml" -Dmaven.repo.local="$DEST/m2" dependency:copy-dependencies \
     -DincludeScope=runtime -DoutputDirectory="$DEST/jars.part" > "$DEST/mvn.log" 2>&1; then
  echo "maven could not fetch kafka_2.13 $VERSION from Maven Central:"
  tail -20 "$DEST/mvn.log"
  exit 2
fi
rm -rf "$DEST/m2"  # the jars are copied out; maven's own cache is not needed again
touch "$DEST/jars.part/.complete-$VERSION"
mv "$DEST/jars.part" "$DEST/jars"
