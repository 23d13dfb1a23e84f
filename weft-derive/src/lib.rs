//! `#[derive(Equivalence)]` for plain structs (named, tuple or unit): the datatype lists each
//! field at its offset, in declaration order, with the field type's own datatype, and the
//! struct's size as extent. Works when the `weft` dependency is renamed (e.g. to `mpi`).

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Index};

/// Derives `Equivalence` for a struct whose fields all implement it.
#[proc_macro_derive(Equivalence)]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn crate_path() -> TokenStream2 {
    use proc_macro_crate::{crate_name, FoundCrate};
    match crate_name("weft") {
        Ok(FoundCrate::Itself) => quote!(crate),
        Ok(FoundCrate::Name(name)) => {
            let ident = syn::Ident::new(&name, proc_macro2::Span::call_site());
            quote!(::#ident)
        }
        Err(_) => quote!(::weft),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "derive(Equivalence) supports structs without generic parameters",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "derive(Equivalence) supports structs only",
        ));
    };
    let krate = crate_path();
    let fields: Vec<TokenStream2> = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| {
                let (id, ty) = (f.ident.as_ref().expect("named"), &f.ty);
                quote!((::core::mem::offset_of!(Self, #id) as #krate::datatype::Address,
                        #krate::datatype::map_of::<#ty>()))
            })
            .collect(),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let (idx, ty) = (Index::from(i), &f.ty);
                quote!((::core::mem::offset_of!(Self, #idx) as #krate::datatype::Address,
                        #krate::datatype::map_of::<#ty>()))
            })
            .collect(),
        Fields::Unit => vec![],
    };
    Ok(quote! {
        // SAFETY: every field is described at its own offset by its type's datatype, and the
        // extent is the struct's size; the fields' types are themselves `Equivalence`.
        unsafe impl #krate::datatype::Equivalence for #name {
            type Out = #krate::datatype::DatatypeRef<'static>;
            fn static_type_map() -> ::core::option::Option<&'static #krate::datatype::TypeMap> {
                ::core::option::Option::Some(Self::equivalent_datatype().into_map())
            }
            fn equivalent_datatype() -> Self::Out {
                // SAFETY: this is `Self`'s own impl, and the list is every field of `Self` at
                // its `offset_of!` with its own type's datatype.
                unsafe { #krate::datatype::derived::<Self>(|| ::std::vec![#(#fields),*]) }
            }
        }
    })
}
