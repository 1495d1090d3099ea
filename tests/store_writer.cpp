// A second process for tst_store_concurrency: opens the catalog the way the CLI and the GUI
// do (Store), imports one user model named NAME-model when asked, stores COUNT validation
// runs named NAME, one transaction each, and prints how many runs the catalog then holds.
//   store_writer PATH COUNT NAME [--import] [--wait-ms MS]
// (--wait-ms: the store's busy timeout, for runs where many processes start on a loaded machine.)
// Exit 0, or 1 with the store's error on stderr.
#include "Store.h"
#include "StoreError.h"

#include <QCoreApplication>
#include <QJsonObject>

#include <cstdio>
#include <cstdlib>
#include <exception>

using namespace shardscope;

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    if (argc < 4) {
        std::fprintf(stderr, "usage: store_writer PATH COUNT NAME [--import]\n");
        return 2;
    }
    const QString path = QString::fromLocal8Bit(argv[1]);
    const int count = std::atoi(argv[2]);
    const std::string name = argv[3];
    bool import = false;
    DatabaseOptions options;
    for (int i = 4; i < argc; ++i) {
        if (std::string(argv[i]) == "--import")
            import = true;
        else if (std::string(argv[i]) == "--wait-ms" && i + 1 < argc)
            options.busy_timeout_ms = std::atoi(argv[++i]);
    }
    try {
        Store store(path, options);
        if (import) {
            // The shape of tests/MalformedDocuments.h's valid model, under this process's name.
            store.specs().importDocument(QJsonObject{
                {"schema", "shardscope.model/1"}, {"name", QString::fromStdString(name + "-model")},
                {"family", "decoder"}, {"layers", 12}, {"hidden", 768}, {"heads", 12}, {"kv_heads", 12},
                {"ffn_hidden", 3072}, {"mlp", "gelu"}, {"vocab", 50257}, {"max_seq", 1024},
                {"positions", "learned"}, {"norm", "layernorm"}, {"bias", true}, {"tied_embeddings", true}});
        }
        for (int i = 0; i < count; ++i)
            store.runs().storeValidationRun(name, QJsonObject{{"writer", QString::fromStdString(name)}, {"i", i}});
        std::printf("%zu\n", store.runs().validationRuns(1'000'000).size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
