// A table of malformed documents shared by the JSON reader tests and the
// catalog import tests: each must fail, name its field path, and (in the
// catalog) change nothing.
#pragma once

#include <QByteArray>
#include <QRegularExpression>
#include <QString>
#include <QTest>

namespace malformed {

// A valid model document that the rows below break one field at a time.
inline QByteArray validModel(const QString& name = QStringLiteral("test-model"))
{
    return QStringLiteral(R"({"schema":"shardscope.model/1","name":"%1","family":"decoder","layers":12,
        "hidden":768,"heads":12,"kv_heads":12,"ffn_hidden":3072,"mlp":"gelu","vocab":50257,"max_seq":1024,
        "positions":"learned","norm":"layernorm","bias":true,"tied_embeddings":true})")
        .arg(name)
        .toUtf8();
}

inline QByteArray replaced(const char* field, const char* value)
{
    QString doc = QString::fromUtf8(validModel());
    const QString key = QStringLiteral("\"%1\":").arg(QLatin1String(field));
    const qsizetype at = doc.indexOf(key);
    const qsizetype end = doc.indexOf(QRegularExpression(QStringLiteral("[,}]")), at + key.size());
    doc.replace(at + key.size(), end - at - key.size(), QLatin1String(value));
    return doc.toUtf8();
}

// Columns: text, expected field path fragment, expected message fragment.
inline void addRows()
{
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("message");
    QTest::newRow("truncated file") << validModel().left(80) << "" << "invalid JSON at line";
    QTest::newRow("not an object") << QByteArray("[1, 2]") << "" << "object";
    QTest::newRow("wrong type") << replaced("layers", "\"twelve\"") << "model.layers" << "expected an integer";
    QTest::newRow("negative size") << replaced("hidden", "-768") << "model.hidden" << "out of range";
    QTest::newRow("zero size") << replaced("heads", "0") << "model.heads" << "out of range";
    QTest::newRow("not an integer") << replaced("layers", "12.5") << "model.layers" << "not an integer";
    QTest::newRow("absurd magnitude") << replaced("layers", "1e30") << "model.layers" << "out of range";
    QTest::newRow("unknown enum value") << replaced("mlp", "\"swishy\"") << "model.mlp" << "one of: gelu";
    QTest::newRow("divisibility") << replaced("kv_heads", "5") << "model.heads" << "not divisible by kv_heads 5";
    QTest::newRow("unknown field") << QByteArray(validModel()).replace("\"hidden\"", "\"hiden\"") << "model.hiden"
                                   << "unknown field";
    QTest::newRow("missing field") << QByteArray(validModel()).replace("\"vocab\":50257,", "") << "model.vocab"
                                   << "required";
    QTest::newRow("newer schema") << QByteArray(validModel()).replace("model/1", "model/9") << "model.schema"
                                  << "newer";
    QTest::newRow("chip with bad unit")
        << QByteArray(R"({"schema":"shardscope.chip/1","name":"c","peak_flops":{"bf16":"100 TFLOP/s"},
                          "hbm_bytes":"32 parsecs","hbm_bytes_per_second":"1 TB/s"})")
        << "chip.hbm_bytes" << "unknown unit";
    QTest::newRow("chip with negative memory")
        << QByteArray(R"({"schema":"shardscope.chip/1","name":"c","peak_flops":{"bf16":1e14},
                          "hbm_bytes":-5,"hbm_bytes_per_second":1e12})")
        << "chip.hbm_bytes" << "positive";
    QTest::newRow("node with unknown chip")
        << QByteArray(R"({"schema":"shardscope.node/1","name":"n","chip":"no-such-chip","chips_per_node":8,
                          "intra_topology":"switch","intra_link_bytes_per_second":"450 GB/s"})")
        << "node.chip" << "no chip named";
    QTest::newRow("node with unknown topology")
        << QByteArray(R"({"schema":"shardscope.node/1","name":"n","chip":"h100-sxm","chips_per_node":8,
                          "intra_topology":"hypercube","intra_link_bytes_per_second":"450 GB/s"})")
        << "node.intra_topology" << "hypercube";
    // Issue 19: Qt kept the last of two equal keys without a word.
    QTest::newRow("duplicate key") << QByteArray(validModel()).replace("\"layers\":12,", "\"layers\":12,\"layers\":24,")
                                   << "layers" << "given twice";
    QTest::newRow("duplicate key written with an escape")
        << QByteArray(validModel()).replace("\"hidden\":768,", "\"hidden\":768,\"hidd\\u0065n\":1024,") << "hidden"
        << "given twice";
    QTest::newRow("unknown kind") << QByteArray(R"({"schema":"shardscope.spaceship/1","name":"x"})") << "schema"
                                  << "is not a";
}

} // namespace malformed
