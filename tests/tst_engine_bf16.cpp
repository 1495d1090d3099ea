// bf16 emulation (engine/Bf16.h) against an independent reference: the two
// bf16 neighbours of a float are computed with double arithmetic on exact
// values (frexp/ldexp/floor, no bit tricks), then round-to-nearest-even and
// stochastic rounding are checked against them, bit for bit.
#include "Bf16.h"

#include <QTest>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

using namespace shardscope::engine;

namespace {

constexpr double kTwo128 = 0x1p128;  // first magnitude past bf16's (and fp32's) largest finite value

// The bf16 values around a finite float, by magnitude: lo <= |x| < hi = lo + ulp,
// with lo == |x| when x is already a bf16 value. Exact in double: bf16 has an
// 8-bit significand and its subnormal spacing is 2^-133 (fp32's 2^-149 times 2^16).
struct Neighbours {
    double magnitude = 0;  // |x|
    double lo = 0;
    double hi = 0;         // may be 2^128, which bf16 represents as infinity
    double ulp = 0;
    bool loIsEven = true;  // lo's significand is even (its last stored mantissa bit is 0)
};

Neighbours neighbours(float x)
{
    Neighbours n;
    n.magnitude = std::fabs(double(x));
    int exponent = 0;
    std::frexp(n.magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
    n.ulp = std::ldexp(1.0, std::max(exponent - 8, -133));
    const double k = std::floor(n.magnitude / n.ulp);  // exact: division by a power of two
    n.lo = k * n.ulp;
    n.hi = (k + 1) * n.ulp;
    n.loIsEven = std::fmod(k, 2.0) == 0.0;
    return n;
}

// A magnitude as bf16 represents it: 2^128 and above is infinity.
double representable(double magnitude) { return magnitude >= kTwo128 ? HUGE_VAL : magnitude; }

double referenceNearestEvenMagnitude(float x)
{
    const Neighbours n = neighbours(x);
    const double below = n.magnitude - n.lo, above = n.hi - n.magnitude;  // both exact
    double m;
    if (below < above)
        m = n.lo;
    else if (above < below)
        m = n.hi;
    else
        m = n.loIsEven ? n.lo : n.hi;  // tie: even significand
    return representable(m);
}

float fromBits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t toBits(float x) { return std::bit_cast<std::uint32_t>(x); }

QByteArray hex(std::uint32_t bits) { return "0x" + QByteArray::number(bits, 16).rightJustified(8, '0'); }

// Checks one finite or infinite non-NaN float; returns an empty string when it is right.
QByteArray checkNearestEven(float x)
{
    const std::uint16_t b = bf16FromFloatNearestEven(x);
    const float r = floatFromBf16(b);
    const auto what = [&]() -> QByteArray {  // built only on failure: the sweeps call this tens of millions of times
        return "x = " + hex(toBits(x)) + " (" + QByteArray::number(double(x), 'g', 17) + ") -> bf16 " + hex(b) +
               " (" + QByteArray::number(double(r), 'g', 17) + ")";
    };
    if (std::isinf(x))
        return std::isinf(r) && std::signbit(r) == std::signbit(x) ? QByteArray() : what() + ": inf not kept";
    if (std::isnan(r))
        return what() + ": finite input became NaN";
    if (std::signbit(r) != std::signbit(x))
        return what() + ": sign changed";
    const Neighbours n = neighbours(x);
    const double m = std::fabs(double(r));
    if (m != representable(n.lo) && m != representable(n.hi))
        return what() + ": not one of the neighbours " + QByteArray::number(n.lo, 'g', 17) + ", " +
               QByteArray::number(n.hi, 'g', 17);
    const double mine = std::fabs((m == HUGE_VAL ? kTwo128 : m) - n.magnitude);
    const double other = std::fabs((m == representable(n.lo) ? n.hi : n.lo) - n.magnitude);
    if (mine > other)
        return what() + ": the other neighbour is nearer";
    if (m != referenceNearestEvenMagnitude(x))
        return what() + ": tie not broken to even, expected " +
               QByteArray::number(referenceNearestEvenMagnitude(x), 'g', 17);
    return {};
}

// Stochastic rounding of one finite float with one random16; empty when right.
QByteArray checkStochastic(float x, std::uint16_t random16)
{
    const std::uint16_t b = bf16FromFloatStochastic(x, random16);
    const float r = floatFromBf16(b);
    const auto what = [&]() -> QByteArray {
        return "x = " + hex(toBits(x)) + " (" + QByteArray::number(double(x), 'g', 17) +
               "), random16 = " + QByteArray::number(random16) + " -> bf16 " + hex(b);
    };
    if (std::isnan(r))
        return what() + ": finite input became NaN";
    if (std::signbit(r) != std::signbit(x))
        return what() + ": sign changed";
    const Neighbours n = neighbours(x);
    const double m = std::fabs(double(r));
    if (m != representable(n.lo) && m != representable(n.hi))
        return what() + ": not one of the neighbours";
    if (n.lo == n.magnitude && m != n.lo)
        return what() + ": an exact bf16 value was changed";
    if (bf16FromFloatStochastic(x, random16) != b)
        return what() + ": not deterministic";
    return {};
}

} // namespace

class TstEngineBf16 : public QObject {
    Q_OBJECT

private slots:
    void referenceSelfCheck()
    {
        // The reference itself, on values worked out by hand.
        const Neighbours one = neighbours(1.0f);
        QCOMPARE(one.lo, 1.0);
        QCOMPARE(one.hi, 1.0 + 0x1p-7);
        const Neighbours sub = neighbours(fromBits(0x00018000u));  // 1.5 * 2^-133
        QCOMPARE(sub.lo, 0x1p-133);
        QCOMPARE(sub.hi, 0x1p-132);
        QVERIFY(!sub.loIsEven);
        const Neighbours top = neighbours(FLT_MAX);
        QCOMPARE(top.lo, (2.0 - 0x1p-7) * 0x1p127);
        QCOMPARE(top.hi, kTwo128);
        QCOMPARE(referenceNearestEvenMagnitude(FLT_MAX), HUGE_VAL);
    }

    void nearestEvenEdgeCases_data()
    {
        QTest::addColumn<quint32>("input");     // fp32 bits
        QTest::addColumn<quint32>("expected");  // bf16 bits
        QTest::newRow("+0") << 0x00000000u << 0x0000u;
        QTest::newRow("-0 keeps its sign") << 0x80000000u << 0x8000u;
        QTest::newRow("1 is exact") << toBits(1.0f) << 0x3F80u;
        QTest::newRow("-2 is exact") << toBits(-2.0f) << 0xC000u;
        QTest::newRow("1 + 2^-8: tie between 1 and 1 + 2^-7 rounds to even 1") << toBits(1.0f + 0x1p-8f) << 0x3F80u;
        QTest::newRow("1 + 3*2^-8: tie rounds up to even 1 + 2^-6") << toBits(1.0f + 3 * 0x1p-8f) << 0x3F82u;
        QTest::newRow("just above the 1 + 2^-8 tie rounds up") << toBits(1.0f + 0x1p-8f + 0x1p-23f) << 0x3F81u;
        QTest::newRow("just below the 1 + 2^-8 tie rounds down") << toBits(1.0f + 0x1p-8f - 0x1p-23f) << 0x3F80u;
        QTest::newRow("just below the 1 + 3*2^-8 tie rounds down to odd")
            << toBits(1.0f + 3 * 0x1p-8f - 0x1p-23f) << 0x3F81u;
        QTest::newRow("-(1 + 2^-8): negative tie to even") << toBits(-(1.0f + 0x1p-8f)) << 0xBF80u;
        QTest::newRow("-(1 + 3*2^-8): negative tie to even") << toBits(-(1.0f + 3 * 0x1p-8f)) << 0xBF82u;
        QTest::newRow("-(1 + 2^-8 + 2^-23) rounds away from zero") << toBits(-(1.0f + 0x1p-8f + 0x1p-23f))
                                                                  << 0xBF81u;
        QTest::newRow("just below 2 rounds up into the next binade") << 0x3FFFFFFFu << 0x4000u;
        QTest::newRow("0.1") << toBits(0.1f) << 0x3DCDu;  // 0.1f = 0x3DCCCCCD
        QTest::newRow("pi") << toBits(3.14159265f) << 0x4049u;
        QTest::newRow("largest finite float rounds to +inf") << toBits(FLT_MAX) << 0x7F80u;
        QTest::newRow("-largest finite float rounds to -inf") << toBits(-FLT_MAX) << 0xFF80u;
        QTest::newRow("largest finite bf16 is exact") << 0x7F7F0000u << 0x7F7Fu;
        QTest::newRow("just below halfway to 2^128 stays finite") << 0x7F7F7FFFu << 0x7F7Fu;
        QTest::newRow("halfway to 2^128 ties to even, which is inf") << 0x7F7F8000u << 0x7F80u;
        QTest::newRow("smallest denormal rounds to +0") << 0x00000001u << 0x0000u;
        QTest::newRow("-smallest denormal rounds to -0") << 0x80000001u << 0x8000u;
        QTest::newRow("denormal tie 2^-134 rounds to even 0") << 0x00008000u << 0x0000u;
        QTest::newRow("denormal just above 2^-134 rounds up") << 0x00008001u << 0x0001u;
        QTest::newRow("denormal tie 1.5*2^-133 rounds to even 2^-132") << 0x00018000u << 0x0002u;
        QTest::newRow("smallest bf16 denormal is exact") << 0x00010000u << 0x0001u;
        QTest::newRow("largest denormal rounds up to FLT_MIN") << 0x007FFFFFu << 0x0080u;
        QTest::newRow("FLT_MIN is exact") << toBits(FLT_MIN) << 0x0080u;
        QTest::newRow("+inf") << 0x7F800000u << 0x7F80u;
        QTest::newRow("-inf") << 0xFF800000u << 0xFF80u;
    }

    void nearestEvenEdgeCases()
    {
        QFETCH(quint32, input);
        QFETCH(quint32, expected);
        const float x = fromBits(input);
        QCOMPARE(quint32(bf16FromFloatNearestEven(x)), expected);
        const float r = roundToBf16NearestEven(x);
        QCOMPARE(toBits(r), expected << 16);
        // The table agrees with the reference too.
        if (!std::isinf(x))
            QCOMPARE(std::fabs(double(r)), referenceNearestEvenMagnitude(x));
    }

    void nearestEvenNaN_data()
    {
        QTest::addColumn<quint32>("input");
        QTest::newRow("quiet NaN") << 0x7FC00000u;
        QTest::newRow("negative quiet NaN") << 0xFFC00000u;
        QTest::newRow("NaN with payload only in the low 16 bits") << 0x7F800001u;
        QTest::newRow("negative NaN with payload only in the low 16 bits") << 0xFF80FFFFu;
        QTest::newRow("signalling NaN with a high payload") << 0x7FA00000u;
        QTest::newRow("all-ones NaN") << 0xFFFFFFFFu;
        QTest::newRow("NaN that would carry into the sign") << 0x7FFFFFFFu;
    }

    void nearestEvenNaN()
    {
        QFETCH(quint32, input);
        const float x = fromBits(input);
        QVERIFY(std::isnan(x));
        const std::uint16_t b = bf16FromFloatNearestEven(x);
        const float r = floatFromBf16(b);
        QVERIFY2(std::isnan(r), hex(b).constData());
        QCOMPARE(std::signbit(r), std::signbit(x));
        QVERIFY2(b & 0x0040u, "bf16 NaN is not quiet");
        // Stochastic rounding keeps NaN whatever the random bits.
        for (std::uint32_t random16 : {0x0000u, 0x0001u, 0x8000u, 0xFFFFu}) {
            const float s = roundToBf16Stochastic(x, std::uint16_t(random16));
            QVERIFY2(std::isnan(s), hex(toBits(s)).constData());
            QCOMPARE(std::signbit(s), std::signbit(x));
        }
    }

    // Dense sweeps of fp32 bit patterns, [first, last] with a stride, against the reference.
    void nearestEvenSweep_data()
    {
        QTest::addColumn<quint32>("first");
        QTest::addColumn<quint32>("last");
        QTest::addColumn<quint32>("stride");
        QTest::newRow("every float in [1, 2)") << 0x3F800000u << 0x3FFFFFFFu << 1u;
        QTest::newRow("every float in (-2, -1]") << 0xBF800000u << 0xBFFFFFFFu << 1u;
        QTest::newRow("every positive denormal") << 0x00000000u << 0x007FFFFFu << 1u;
        QTest::newRow("negative denormals, stride 7") << 0x80000000u << 0x807FFFFFu << 7u;
        QTest::newRow("every float in the top binade up to FLT_MAX") << 0x7F000000u << 0x7F7FFFFFu << 1u;
        QTest::newRow("all positive finite floats, stride 65521") << 0x00000000u << 0x7F7FFFFFu << 65521u;
        QTest::newRow("all negative finite floats, stride 65519") << 0x80000000u << 0xFF7FFFFFu << 65519u;
    }

    void nearestEvenSweep()
    {
        QFETCH(quint32, first);
        QFETCH(quint32, last);
        QFETCH(quint32, stride);
        std::uint64_t checked = 0;
        for (std::uint64_t bits = first; bits <= last; bits += stride, ++checked) {
            const QByteArray problem = checkNearestEven(fromBits(std::uint32_t(bits)));
            if (!problem.isEmpty())
                QFAIL(problem.constData());
        }
        QVERIFY(checked > 100);
    }

    void nearestEvenRandomBits_data()
    {
        QTest::addColumn<quint32>("seed");
        QTest::newRow("mt19937 seed 1") << 1u;
        QTest::newRow("mt19937 seed 20240607") << 20240607u;
        QTest::newRow("mt19937 seed 0xBF16") << 0xBF16u;
    }

    void nearestEvenRandomBits()
    {
        QFETCH(quint32, seed);
        std::mt19937 rng(seed);
        int nans = 0;
        for (int i = 0; i < 1'000'000; ++i) {
            const float x = fromBits(std::uint32_t(rng()));
            if (std::isnan(x)) {
                ++nans;
                if (!std::isnan(roundToBf16NearestEven(x)))
                    QFAIL(("NaN " + hex(toBits(x)) + " did not stay NaN").constData());
                continue;
            }
            const QByteArray problem = checkNearestEven(x);
            if (!problem.isEmpty())
                QFAIL(problem.constData());
        }
        QVERIFY(nans > 0);  // random bit patterns include NaNs (about 0.4%): they were exercised
    }

    void roundTripEveryBf16()
    {
        int checked = 0;
        for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
            const float x = floatFromBf16(std::uint16_t(b));
            if (std::isnan(x))
                continue;
            ++checked;
            if (bf16FromFloatNearestEven(x) != b)
                QFAIL(("bf16 " + hex(b) + " is not a fixed point of nearest-even rounding").constData());
            const float y = floatFromBf16(bf16FromFloatNearestEven(x));
            if (!(y == x) || std::signbit(y) != std::signbit(x))
                QFAIL(("bf16 " + hex(b) + " did not survive the round trip").constData());
            for (std::uint32_t random16 : {0x0000u, 0x7FFFu, 0xFFFFu})
                if (bf16FromFloatStochastic(x, std::uint16_t(random16)) != b)
                    QFAIL(("bf16 " + hex(b) + " changed by stochastic rounding").constData());
        }
        QCOMPARE(checked, 65536 - 2 * 127);  // 2 x (2^7 - 1) NaN patterns
    }

    void stochasticEdgeCases_data()
    {
        QTest::addColumn<quint32>("input");
        QTest::addColumn<quint32>("random16");
        QTest::addColumn<quint32>("expected");
        QTest::newRow("random 0 truncates 1 + 2^-8 + 2^-9") << toBits(1.0f + 0x1p-8f + 0x1p-9f) << 0u << 0x3F80u;
        QTest::newRow("random 0xFFFF rounds up 1 + 2^-23") << toBits(1.0f + 0x1p-23f) << 0xFFFFu << 0x3F81u;
        QTest::newRow("random 0xFFFE keeps 1 + 2^-23") << toBits(1.0f + 0x1p-23f) << 0xFFFEu << 0x3F80u;
        QTest::newRow("random 0 truncates -(1 + 2^-7 - 2^-23) toward zero")
            << toBits(-(1.0f + 0x1p-7f - 0x1p-23f)) << 0u << 0xBF80u;
        QTest::newRow("random 0xFFFF rounds -(1 + 2^-23) away from zero")
            << toBits(-(1.0f + 0x1p-23f)) << 0xFFFFu << 0xBF81u;
        QTest::newRow("half: random 0x7FFF keeps 1 + 2^-8") << toBits(1.0f + 0x1p-8f) << 0x7FFFu << 0x3F80u;
        QTest::newRow("half: random 0x8000 rounds 1 + 2^-8 up") << toBits(1.0f + 0x1p-8f) << 0x8000u << 0x3F81u;
        QTest::newRow("random 0xFFFF carries 2 - 2^-23 into 2") << 0x3FFFFFFFu << 0xFFFFu << 0x4000u;
        QTest::newRow("random 0xFFFF rounds the smallest denormal up") << 0x00000001u << 0xFFFFu << 0x0001u;
        QTest::newRow("random 0 truncates the largest denormal") << 0x007FFFFFu << 0u << 0x007Fu;
        QTest::newRow("random 0 keeps FLT_MAX finite") << toBits(FLT_MAX) << 0u << 0x7F7Fu;
        QTest::newRow("random 0xFFFF rounds FLT_MAX up to inf") << toBits(FLT_MAX) << 0xFFFFu << 0x7F80u;
        QTest::newRow("+0 stays +0") << 0x00000000u << 0xFFFFu << 0x0000u;
        QTest::newRow("-0 stays -0") << 0x80000000u << 0xFFFFu << 0x8000u;
        QTest::newRow("+inf stays +inf") << 0x7F800000u << 0xFFFFu << 0x7F80u;
        QTest::newRow("-inf stays -inf") << 0xFF800000u << 0xFFFFu << 0xFF80u;
    }

    void stochasticEdgeCases()
    {
        QFETCH(quint32, input);
        QFETCH(quint32, random16);
        QFETCH(quint32, expected);
        QCOMPARE(quint32(bf16FromFloatStochastic(fromBits(input), std::uint16_t(random16))), expected);
        QCOMPARE(toBits(roundToBf16Stochastic(fromBits(input), std::uint16_t(random16))), expected << 16);
    }

    void stochasticNeighbours_data()
    {
        QTest::addColumn<quint32>("seed");
        QTest::newRow("mt19937 seed 7") << 7u;
        QTest::newRow("mt19937 seed 123456789") << 123456789u;
    }

    // Random finite floats and random16 values: always a neighbour (floor or ceil
    // in magnitude), 0 truncates, 0xFFFF rounds up whenever any discarded bit is set.
    void stochasticNeighbours()
    {
        QFETCH(quint32, seed);
        std::mt19937 rng(seed);
        int checked = 0;
        while (checked < 300'000) {
            const float x = fromBits(std::uint32_t(rng()));
            if (!std::isfinite(x))
                continue;
            ++checked;
            const auto random16 = std::uint16_t(rng() & 0xFFFFu);
            const QByteArray problem = checkStochastic(x, random16);
            if (!problem.isEmpty())
                QFAIL(problem.constData());
            const Neighbours n = neighbours(x);
            const double truncated = std::fabs(double(roundToBf16Stochastic(x, 0)));
            if (truncated != representable(n.lo))
                QFAIL(("random16 = 0 did not truncate " + hex(toBits(x))).constData());
            const double up = std::fabs(double(roundToBf16Stochastic(x, 0xFFFF)));
            const double expectedUp = representable(n.lo == n.magnitude ? n.lo : n.hi);
            if (up != expectedUp)
                QFAIL(("random16 = 0xFFFF did not round " + hex(toBits(x)) + " up").constData());
        }
    }

    // Over all 2^16 equally likely random16 values, the number that round up is
    // exactly 2^16 times the discarded fraction (|x| - lo) / ulp.
    void stochasticRoundUpCount_data()
    {
        QTest::addColumn<quint32>("seed");
        QTest::newRow("mt19937 seed 99") << 99u;
    }

    void stochasticRoundUpCount()
    {
        QFETCH(quint32, seed);
        std::mt19937 rng(seed);
        for (int i = 0; i < 300; ++i) {
            float x = fromBits(std::uint32_t(rng()));
            if (!std::isfinite(x) || std::fabs(x) > 0x1p127f)  // keep hi finite so the count is well defined
                continue;
            const Neighbours n = neighbours(x);
            const double expected = (n.magnitude - n.lo) / n.ulp * 65536.0;  // an integer, exactly
            int ups = 0;
            for (std::uint32_t r = 0; r <= 0xFFFFu; ++r)
                if (std::fabs(double(roundToBf16Stochastic(x, std::uint16_t(r)))) == n.hi)
                    ++ups;
            if (double(ups) != expected)
                QFAIL(("x = " + hex(toBits(x)) + ": " + QByteArray::number(ups) + " of 65536 round up, expected " +
                       QByteArray::number(expected))
                          .constData());
        }
    }

    void stochasticIsUnbiased_data()
    {
        QTest::addColumn<float>("x");
        QTest::newRow("0.1") << 0.1f;
        QTest::newRow("1/3") << 1.0f / 3.0f;
        QTest::newRow("-e") << -2.71828183f;
        QTest::newRow("1 + 2^-20 (a tiny update to 1)") << 1.0f + 0x1p-20f;
        QTest::newRow("1 + 2^-8 (exactly half an ulp)") << 1.0f + 0x1p-8f;
        QTest::newRow("-1e-3") << -1e-3f;
        QTest::newRow("12345.678") << 12345.678f;
        QTest::newRow("3e38 (near the top)") << 3e38f;
        QTest::newRow("denormal 1e-40") << 1e-40f;
        QTest::newRow("negative denormal -3e-42") << -3e-42f;
    }

    // The mean over all 2^16 random16 values (exactly uniform) equals x; nearest
    // rounding would be off by up to half an ulp (2^-9 relative).
    void stochasticIsUnbiased()
    {
        QFETCH(float, x);
        double sum = 0;
        bool sawLo = false, sawHi = false;
        const Neighbours n = neighbours(x);
        for (std::uint32_t r = 0; r <= 0xFFFFu; ++r) {
            const float s = roundToBf16Stochastic(x, std::uint16_t(r));
            sum += double(s);
            sawLo |= std::fabs(double(s)) == n.lo;
            sawHi |= std::fabs(double(s)) == n.hi;
        }
        const double mean = sum / 65536.0;
        QVERIFY2(std::fabs(mean - double(x)) <= 1e-6 * std::fabs(double(x)),
                 qPrintable(QStringLiteral("mean %1, x %2").arg(mean, 0, 'g', 17).arg(double(x), 0, 'g', 17)));
        QVERIFY(sawLo);
        QCOMPARE(sawHi, n.lo != n.magnitude);
        // Nearest-even is biased for these inputs (none is a bf16 value): the test can tell the difference.
        QVERIFY(double(roundToBf16NearestEven(x)) != double(x));
    }
};

QTEST_GUILESS_MAIN(TstEngineBf16)
#include "tst_engine_bf16.moc"
