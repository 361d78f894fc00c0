"""The planted interest hierarchy and the words that describe it.

8 coarse domains x 4 mid interests x 4 fine interests = 128 fine interests, hand-written in plain
English so that a sentence-embedding model sees real semantics. Only the coarse and mid levels
are exposed as a visible taxonomy; the fine level is what a model has to discover. Index
conventions: fine ``f`` in 0..127 belongs to mid ``f // 4`` (0..31), which belongs to coarse
``f // 16`` (0..7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Indentation gives the level: coarse | words, then mid | typical price | words,
# then fine | words. Fine words come first in every generated text, so they carry the signal.
_SPEC = """
Sports & Outdoors | sports outdoor athletic active adventure
  Cycling | 300 | cycling bike ride pedal cyclist
    road bikes | carbon frame drop handlebar racing gears wheelset groupset
    cycling helmets | helmet head protection vented aero impact visor
    bike lights | lumens rechargeable headlight taillight night visibility led
    cycling apparel | jersey bib shorts padded chamois gloves windproof
  Running | 120 | running runner jog marathon race
    running shoes | shoe cushioned sole trainer stride midsole tread
    gps watches | gps pace heart rate tracker wrist splits
    running shorts | shorts breathable liner split quick dry pocket
    hydration vests | vest hydration flask bladder trail water ultra
  Camping | 150 | camping camp tent wilderness hiking
    tents | tent waterproof poles footprint vestibule sleeps rainfly
    sleeping bags | sleeping bag down insulated mummy warmth zipper
    camp stoves | stove burner gas canister cooking boil fuel
    headlamps | headlamp beam battery strap trail dark red
  Water Sports | 350 | water swim sea waves beach
    surfboards | surfboard surf fins longboard shortboard wax swell
    wetsuits | wetsuit neoprene thermal zip suit cold seams
    kayaks | kayak paddle inflatable river canoe hull touring
    snorkel gear | snorkel mask diving reef underwater goggles fins
Home & Garden | home house household living interior
  Kitchen | 60 | kitchen cooking cook chef recipe
    cookware | pan pot skillet nonstick cast iron saucepan lid
    kitchen knives | knife blade steel sharpening santoku cutting board
    coffee makers | brewer drip carafe filter espresso machine grinder
    baking tools | baking whisk mixing bowl rolling pin oven tray
  Furniture | 400 | furniture room seating wood upholstered
    sofas | sofa couch sectional cushions fabric recliner lounge
    office chairs | chair ergonomic lumbar swivel desk mesh armrest
    bookshelves | bookshelf shelves shelving oak storage unit books
    mattresses | mattress memory foam spring firm bed pillow sleep
  Gardening | 40 | garden gardening yard plants grow
    seeds | seeds heirloom vegetable flower sowing germination packet
    lawn mowers | mower lawn grass cordless blade cutting mulch
    garden tools | trowel pruner shears rake spade hoe gloves
    planters | planter pot terracotta raised bed soil drainage
  Home Decor | 50 | decor decorative style cozy accent
    rugs | rug woven wool area carpet runner pile
    wall art | print poster canvas frame painting gallery framed
    candles | candle scented wax soy wick fragrance jar
    lamps | lamp lampshade bulb floor table dimmable brass
Fashion | fashion style clothing apparel wardrobe
  Womenswear | 70 | women womens ladies feminine
    dresses | dress midi maxi floral wrap sundress evening
    handbags | handbag purse tote leather clutch shoulder strap
    heels | heels pumps stiletto sandals platform strappy slingback
    blouses | blouse silk top sleeve collar chiffon buttoned
  Menswear | 120 | men mens gentleman menswear
    suits | suit blazer trousers tailored wool lapel slim
    ties | tie necktie silk bow pattern knot pocket square
    dress shoes | oxford brogue derby leather loafer polished laces
    wool coats | coat overcoat wool peacoat camel winter double breasted
  Jewelry & Watches | 250 | jewelry jewellery accessory luxury
    rings | ring band diamond gold engagement silver solitaire
    necklaces | necklace pendant chain gold pearl charm locket
    luxury watches | watch automatic chronograph dial sapphire swiss bezel
    earrings | earrings stud hoop drop gemstone sterling huggie
  Streetwear | 60 | streetwear urban street casual
    hoodies | hoodie pullover fleece oversized drawstring logo zip
    sneakers | sneakers high top canvas retro skate laces
    caps | cap snapback baseball brim embroidered adjustable visor
    graphic tees | tee shirt graphic print cotton crew vintage
Electronics | electronics tech digital gadget device
  Computers | 900 | computer pc computing desktop
    laptops | laptop notebook ultrabook processor ram ssd screen
    monitors | monitor display 4k refresh ips panel inch
    keyboards | keyboard mechanical switches keycaps typing rgb tenkeyless
    graphics cards | gpu graphics card vram ray tracing rendering
  Phones | 300 | phone mobile smartphone cellular
    smartphones | smartphone android camera unlocked storage 5g flagship
    phone cases | case protective cover shockproof clear magsafe bumper
    chargers | charger usb cable fast charging power bank
    earbuds | earbuds wireless bluetooth noise cancelling buds charging case
  Gaming | 200 | gaming gamer game play
    consoles | console playstation xbox handheld bundle gaming console
    video games | rpg shooter multiplayer adventure edition story open world
    gaming headsets | headset microphone surround sound gamer headphones mic
    controllers | controller gamepad joystick wireless vibration triggers buttons
  Photography | 600 | photography photo camera shoot
    mirrorless cameras | mirrorless sensor megapixel body autofocus interchangeable lens
    lenses | lens zoom prime aperture focal telephoto bokeh
    tripods | tripod stand legs ballhead stable mount carbon
    drones | drone aerial quadcopter flight gimbal footage camera propellers
Food & Drink | food drink taste gourmet flavor
  Coffee & Tea | 20 | coffee tea brew cup caffeine
    coffee beans | beans roast arabica espresso single origin whole bean
    green tea | green sencha leaves antioxidant loose leaf steeped
    matcha | matcha powder ceremonial whisk latte japanese green
    coffee subscriptions | subscription monthly delivery roaster sampler fresh beans
  Wine & Spirits | 35 | wine spirits alcohol bottle bar
    red wine | red merlot cabernet vineyard vintage tannins oak
    whisky | whisky scotch bourbon malt cask aged peated
    craft beer | beer ipa brewery hops lager ale stout
    cocktail kits | cocktail shaker mixer gin bitters vodka syrup
  Healthy Eating | 25 | healthy nutrition diet wholesome
    protein powder | protein whey shake muscle scoop isolate vanilla
    vegan snacks | vegan plant based snack gluten free dairy
    meal kits | meal kit recipes ingredients dinner weekly portions
    organic produce | organic fruit vegetables farm fresh box seasonal
  Snacks & Sweets | 10 | snack sweet treat tasty
    chocolate | chocolate dark cocoa truffle bar milk praline
    cookies | cookies biscuits butter chip baked oatmeal cookie
    gourmet chips | chips crisps salted kettle potato sea salt
    candy | candy gummies lollipop sugar sour jelly beans
Beauty & Wellness | beauty wellness care self glow
  Skincare | 35 | skincare skin face complexion
    moisturizers | moisturizer cream hydrating hyaluronic dry lotion ceramide
    sunscreen | sunscreen spf uv protection mineral sunblock broad spectrum
    serums | serum vitamin retinol niacinamide brightening dropper anti aging
    face masks | mask sheet clay pore detox charcoal peel
  Makeup | 25 | makeup cosmetics look beauty
    lipstick | lipstick lip matte gloss shade lipliner nude
    mascara | mascara lashes volume waterproof curl lengthening brush
    foundation | foundation coverage concealer tone liquid matte finish
    eyeshadow palettes | eyeshadow palette shimmer pigment eyes eyeliner blendable
  Haircare | 30 | hair haircare salon locks
    shampoo | shampoo conditioner sulfate scalp wash volumizing bottle
    hair dryers | dryer blow ionic heat diffuser styling nozzle
    hair color | dye color blonde highlights tint balayage brunette
    styling products | gel wax pomade hold spray mousse curls
  Fitness & Wellness | 60 | fitness workout health exercise
    yoga mats | yoga mat nonslip stretch pilates cork thick
    dumbbells | dumbbells weights adjustable strength kettlebell barbell plates
    massage guns | massage gun recovery percussion muscle deep tissue
    vitamins | vitamins supplement capsules immune daily multivitamin gummies
Travel | travel trip vacation journey getaway
  Flights | 400 | flight airline fly airport
    budget airlines | budget airline cheap fare carry low cost seats
    business class | business class lie flat premium cabin champagne
    airport lounges | lounge access priority pass terminal buffet showers
    flight deals | deals fares roundtrip nonstop booking last minute
  Hotels | 200 | hotel stay room night booking
    beach resorts | resort beach ocean pool inclusive spa cabana
    city hotels | downtown city center skyline rooftop business traveler
    boutique hotels | boutique design charming intimate historic unique rooms
    hostels | hostel dorm backpacker shared social bunk
  Luggage | 150 | luggage bag packing carry
    suitcases | suitcase hardshell spinner wheels checked luggage lock
    travel backpacks | backpack daypack laptop compartment carry on straps padded
    packing cubes | cubes organizer compression pouches zippered mesh packing
    travel pillows | neck pillow memory foam eye plane sleep
  Experiences | 300 | experience tour guided activity
    city tours | walking tour museum landmarks guide sightseeing bus
    cruises | cruise ship cabin deck ports caribbean voyage
    ski trips | ski snow slopes chalet lift resort pass powder
    safari | safari wildlife game drive lodge savanna elephants
Family & Pets | family kids care love
  Baby | 80 | baby infant newborn toddler
    strollers | stroller pram pushchair foldable jogging canopy
    diapers | diapers nappies wipes absorbent newborn size rash
    car seats | car seat harness booster rear facing isofix
    baby monitors | monitor video audio nursery night vision
  Toys | 30 | toys kids play children fun
    building blocks | blocks bricks building construction set kit creative
    dolls | doll dollhouse accessories dress fashion plush
    board games | board game family strategy cards dice
    puzzles | puzzle jigsaw pieces brain piece logic
  Dogs | 40 | dog puppy canine pet
    dog food | kibble grain free chicken food nutrition
    dog toys | chew rope ball squeaky fetch tug
    leashes | leash collar harness lead walking retractable
    dog beds | bed orthopedic cushion crate washable plush
  Cats | 30 | cat kitten feline pet
    cat food | wet food salmon tuna pate dry kibble
    cat litter | litter clumping odor tray scoop box
    scratching posts | scratcher sisal post claws scratching cardboard
    cat trees | tree tower condo perch climbing sisal hammock
"""


def _words(text: str) -> tuple[str, ...]:
    """Whitespace-separated words, duplicates dropped (order kept)."""
    return tuple(dict.fromkeys(text.split()))


# Generic words shared by every domain: they make texts ambiguous, as real ad copy is.
FILLER = _words(
    "premium new classic essential everyday best deal quality limited edition popular gift "
    "value original pro bundle sale favorite"
)
_BRAND_HEADS = _words("North Blue Summit Urban Bright Silver Green Iron Golden Wild Nova Maple")
_BRAND_TAILS = _words("peak line works craft field wave stone leaf forge nest lane point")


@dataclass(frozen=True)
class Interest:
    """One node of the planted hierarchy (coarse, mid or fine)."""

    name: str
    words: tuple[str, ...]
    parent: int  # index one level up, -1 for coarse
    price: float = 0.0  # typical price, set on mid interests only


def _parse(spec: str) -> tuple[tuple[Interest, ...], tuple[Interest, ...], tuple[Interest, ...]]:
    """Turn the indented spec into coarse, mid and fine tuples (checking the 8x4x4 shape)."""
    levels: tuple[list[Interest], list[Interest], list[Interest]] = ([], [], [])
    for line in spec.strip("\n").splitlines():
        depth = (len(line) - len(line.lstrip(" "))) // 2
        parts = [p.strip() for p in line.split("|")]
        parent = len(levels[depth - 1]) - 1 if depth else -1
        price = float(parts[1]) if depth == 1 else 0.0
        levels[depth].append(Interest(parts[0], _words(parts[-1]), parent, price))
    coarse, mid, fine = (tuple(level) for level in levels)
    assert (len(coarse), len(mid), len(fine)) == (8, 32, 128), "hierarchy must be 8 x 4 x 4"
    assert all(f.parent == i // 4 for i, f in enumerate(fine)), "each mid needs 4 fine interests"
    assert all(m.parent == i // 4 for i, m in enumerate(mid)), "each coarse needs 4 mid interests"
    assert all(len(f.words) >= 6 for f in fine), "texts draw 5 words per fine interest"
    return coarse, mid, fine


COARSE, MID, FINE = _parse(_SPEC)
N_COARSE, N_MID, N_FINE = len(COARSE), len(MID), len(FINE)


def _pick(rng: np.random.Generator, words: tuple[str, ...], k: int) -> list[str]:
    """k distinct words in random order (fewer if the list is short)."""
    idx = rng.choice(len(words), size=min(k, len(words)), replace=False)
    return [words[i] for i in idx]


def product_text(rng: np.random.Generator, fine: int) -> tuple[str, str]:
    """A title and a description for a product of a fine interest, worded differently each call."""
    f, m = FINE[fine], MID[fine // 4]
    c = COARSE[fine // 16]
    fw = _pick(rng, f.words, 5)
    mw, cw, fill = _pick(rng, m.words, 2), _pick(rng, c.words, 1), _pick(rng, FILLER, 2)
    title = f"{fill[0].capitalize()} {fw[0]} {f.name}"
    templates = (
        f"{fw[1].capitalize()} {fw[2]} {f.name} with {fw[3]} and {fw[4]}. "
        f"A {fill[1]} pick for {mw[0]} and {cw[0]}.",
        f"Our {fill[1]} {f.name}: {fw[1]}, {fw[2]}, {fw[3]}. Made for {mw[0]} {mw[1]} fans.",
        f"{f.name.capitalize()} built around {fw[1]} and {fw[2]}, {fw[3]} included. "
        f"{cw[0].capitalize()} {mw[0]} {fill[1]}.",
    )
    return title, templates[int(rng.integers(len(templates)))]


def advertiser_text(rng: np.random.Generator, mids: list[int]) -> tuple[str, str]:
    """A brand name and a description built from the mid interests an advertiser sells in."""
    brand = _pick(rng, _BRAND_HEADS, 1)[0] + _pick(rng, _BRAND_TAILS, 1)[0]
    c = COARSE[mids[0] // 4]
    name = f"{brand} {MID[mids[0]].name}"
    sold = [FINE[m * 4 + int(j)].name for m in mids for j in rng.choice(4, 2, replace=False)]
    word, filler = _pick(rng, c.words, 1)[0], _pick(rng, FILLER, 1)[0]
    desc = (
        f"{brand} sells {', '.join(sold[:-1])} and {sold[-1]}. "
        f"{filler.capitalize()} {c.name.lower()} for every {word} fan."
    )
    return name, desc
